# Quartet: `make run` starts the appliance, `make test` checks it. Both install what is missing.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup setup-test run test test-fast test-clone lint bench clean

setup:
	@bash launcher/setup.sh

setup-test:
	@bash launcher/setup.sh --test

run: setup
	@$(PY) -m launcher

test: setup-test
	@$(PY) -m pytest

# The tests that need no cards, no running appliance and no browser (markers set in tests/conftest.py).
test-fast: setup-test
	@$(PY) -m pytest -q -m "not cards and not appliance and not browser"

# A fresh clone in an empty temporary folder (nothing beside it) passes the fast tests: the repository
# carries everything its tests need. The clone reuses this checkout's environment (VENV=...).
test-clone: setup-test
	@bash tests/clone_check.sh "$(abspath $(VENV))"

lint: setup
	@$(PY) -m ruff check .
	@$(PY) -m mypy

bench: setup
	@$(PY) bench/engine.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
