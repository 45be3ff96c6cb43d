# Quartet: `make run` starts the appliance, `make test` checks it. Both install what is missing.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup setup-test run test lint bench clean

setup:
	@bash launcher/setup.sh

setup-test:
	@bash launcher/setup.sh --test

run: setup
	@$(PY) -m launcher

test: setup-test
	@$(PY) -m pytest

lint: setup
	@$(PY) -m ruff check .
	@$(PY) -m mypy

bench: setup
	@$(PY) bench/engine.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
