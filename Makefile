# Every target does its own set-up on a fresh machine: a .venv, torch, then fxviz.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.fxviz-installed

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/fxviz demo

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check fxviz tests benchmarks
	$(BIN)/ruff format --check fxviz tests benchmarks

format: $(STAMP)
	$(BIN)/ruff check --fix fxviz tests benchmarks
	$(BIN)/ruff format fxviz tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/record_overhead.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
