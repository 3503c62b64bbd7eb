# Every target does its own set-up on a fresh machine: the JS bundle (npm), a .venv,
# torch, then fxviz (lint needs only ruff, pyright and eslint). Node.js and npm are
# needed to build the front end from source.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.fxviz-installed
BUNDLE := fxviz/static/widget.js

.PHONY: demo test test-slow screenshots lint lint-python lint-imports lint-types lint-js docs format bench js clean

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
	$(BIN)/fxviz demo --force  # the demo's own report, written again on every run

# The browser tests save screenshots in build/screenshots/ (git-ignored), so a test run
# leaves the checkout clean; `make screenshots` is the one step that updates assets/ (the
# screenshots README.md and docs/ show; the others stay in build/screenshots/).
# Two runs: everything but the browser on every core (pytest-xdist), then the browser tests
# in one process (one JupyterLab, one Chromium; they time what a person waits for, so they
# do not share the cores with other tests).
PYTEST_JOBS ?= auto
test: $(STAMP) $(BUNDLE)
	$(BIN)/python -m pytest -n $(PYTEST_JOBS) -m "not browser" --durations=15
	$(BIN)/python -m pytest -m browser --durations=10

# Generated-graph tests with thousands of examples (the default run has a few hundred).
test-slow: $(STAMP) $(BUNDLE)
	$(BIN)/python -m pytest -m exhaustive tests/test_generated_graphs.py tests/test_generated_modules.py
	$(BIN)/python -m pytest -m matrix_full tests/conformance

screenshots: $(STAMP) $(BUNDLE)
	$(BIN)/python -m pytest -m browser tests/browser
	for f in $$(grep -ohE 'assets/[A-Za-z0-9_.-]+[.]png' README.md docs/*.md | sort -u); do \
		cp build/screenshots/$$(basename $$f) $$f || exit 1; done  # those the docs show

# Lint builds no bundle and downloads no torch: ruff, pyright and import-linter come from
# .venv when `make test` made it, else from a small .venv-lint holding only those three. pyright checks
# against torch's own inline types, so it needs torch importable: without it (a fresh
# machine before `make test`) the type check says so and is skipped, except under CI,
# where it fails (.ci/run lints after testing, so CI always checks types).
LINT_VENV ?= .venv-lint
LINT_BIN := $(if $(wildcard $(BIN)/pyright),$(BIN),$(LINT_VENV)/bin)
NODE_STAMP := node_modules/.package-lock.json

$(LINT_VENV)/.installed:
	$(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/python -m pip install --quiet "ruff>=0.6" "pyright>=1.1.400" "import-linter>=2.1"
	touch $@

$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "npm is needed for the JS lint (apt-get install nodejs npm)"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error

lint: lint-python lint-imports lint-types lint-js

lint-python: $(if $(wildcard $(BIN)/pyright),,$(LINT_VENV)/.installed)
	$(LINT_BIN)/ruff check fxviz tests benchmarks
	$(LINT_BIN)/ruff format --check fxviz tests benchmarks

# The one-way layers of pyproject.toml's [tool.importlinter] (function-level imports too).
lint-imports: $(if $(wildcard $(BIN)/pyright),,$(LINT_VENV)/.installed)
	$(LINT_BIN)/lint-imports --no-cache

lint-types: $(if $(wildcard $(BIN)/pyright),,$(LINT_VENV)/.installed)
	@if $(LINT_BIN)/python -c "import torch" 2>/dev/null; then \
		$(LINT_BIN)/pyright --pythonpath $(LINT_BIN)/python; \
	elif [ -n "$$CI" ]; then \
		echo "pyright: torch is not importable from $(LINT_BIN)/python (run make test first)"; exit 1; \
	else \
		echo "pyright skipped: it checks against torch's types, and torch is not installed here yet; run 'make test' (it installs torch), then 'make lint'"; \
	fi

lint-js: $(NODE_STAMP)
	npm run --silent lint

# The API reference (mkdocs-material + mkdocstrings, from the docstrings), warnings as errors.
DOCS_STAMP := $(VENV)/.fxviz-docs-installed
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

docs: $(DOCS_STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

format: $(STAMP)
	$(BIN)/ruff check --fix fxviz tests benchmarks
	$(BIN)/ruff format fxviz tests benchmarks

# Every benchmark (each prints its own figures and targets), then targets.py: every figure
# of the performance issue side by side, measured interleaved in one run, with the load.
bench: $(STAMP) $(BUNDLE)
	$(BIN)/python benchmarks/record_overhead.py
	$(BIN)/python benchmarks/tensor_statistics.py
	$(BIN)/python benchmarks/gradients.py
	$(BIN)/python benchmarks/shapes.py
	$(BIN)/python benchmarks/render.py
	$(BIN)/python benchmarks/save_compare.py
	$(BIN)/python benchmarks/training.py
	$(BIN)/python benchmarks/any_model.py
	$(BIN)/python benchmarks/real_models.py
	$(BIN)/python benchmarks/conformance.py
	$(BIN)/python benchmarks/widget.py
	$(BIN)/python benchmarks/widget_kernel.py
	$(BIN)/python benchmarks/first_contact.py
	$(BIN)/python benchmarks/targets.py

clean:
	rm -rf $(VENV) $(LINT_VENV) build dist site *.egg-info .pytest_cache .ruff_cache node_modules fxviz/static
