# Every target does its own set-up on a fresh machine: the JS bundle (npm), a .venv,
# torch, then fxviz. Node.js and npm are needed to build the front end from source.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.fxviz-installed
BUNDLE := fxviz/static/widget.js

.PHONY: demo test lint format bench js clean

$(BUNDLE): package.json package-lock.json $(wildcard js/*)
	@command -v npm >/dev/null || { echo "npm is needed to build the fxviz front end (apt-get install nodejs npm)"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	npm run build

js: $(BUNDLE)

$(STAMP): pyproject.toml $(BUNDLE)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP) $(BUNDLE)
	$(BIN)/fxviz demo

test: $(STAMP) $(BUNDLE)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check fxviz tests benchmarks
	$(BIN)/ruff format --check fxviz tests benchmarks

format: $(STAMP)
	$(BIN)/ruff check --fix fxviz tests benchmarks
	$(BIN)/ruff format fxviz tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/record_overhead.py
	$(BIN)/python benchmarks/shapes.py
	$(BIN)/python benchmarks/render.py
	$(BIN)/python benchmarks/save_compare.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache node_modules fxviz/static
