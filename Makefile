# Quartet: `make run` starts the appliance, `make test` checks it. Both install what is missing.
VENV := .venv
PY := $(VENV)/bin/python

# Bytecode is written, into .venv/pycache (the source tree stays clean): each module is compiled once, by the
# first process that imports it. Under PYTHONDONTWRITEBYTECODE every process of the suite and the appliance would
# compile all it imports each time (torch, Gradio, sentence-transformers: 13 s of CPU against 5.6); compiling
# every module at install instead cost a fresh clone's set-up 41 s of CPU (launcher/setup.sh, step 2).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX ?= $(abspath $(VENV))/pycache

.PHONY: setup setup-test run test test-fast test-clone lint bench clean

setup:
	@bash launcher/setup.sh

setup-test:
	@bash launcher/setup.sh --test

run: setup
	@$(PY) -m launcher

# Two workers (pytest-xdist), a file to each at a time: each worker starts its own appliance, cards and
# browser on ports of its own (tests/harness.py). `make test WORKERS=0` runs the suite in one process.
WORKERS ?= 2
test: setup-test
	@$(PY) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=40

# The quick loop, about a minute: no cards, no running appliance, no browser, no MiniLM, no corpus, and none
# of the tests that take a second or more by themselves (`slow`: an app process, Tesseract over pages, memory
# bounds). Markers come from the fixtures a test uses (tests/conftest.py) or are set by hand; make test runs all.
test-fast: setup-test
	@$(PY) -m pytest -q -m "not cards and not appliance and not browser and not embedder and not corpus and not slow"

# A fresh clone in an empty temporary folder (nothing beside it) passes every test that needs no cards,
# no appliance and no browser (the knowledge tests on made documents included): the repository carries
# everything its tests need. The clone reuses this checkout's environment (VENV=...).
test-clone: setup-test
	@bash tests/clone_check.sh "$(abspath $(VENV))"

# mypy checks app, launcher, tests and bench ([tool.mypy] files in pyproject.toml).
lint: setup
	@$(PY) -m ruff check .
	@$(PY) -m ruff format --check .
	@$(PY) -m mypy

bench: setup
	@$(PY) bench/engine.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
