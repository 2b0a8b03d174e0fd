# rcaweb: two commands. `make demo` serves the console on http://127.0.0.1:8000; `make test` runs the suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export RCAWEB_DEBUG ?= true

.PHONY: demo test lint typecheck install install-dev bench e2e clean migrate

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e ".[sim]"

install-dev: $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"

migrate: install
	$(BIN)/python manage.py migrate --noinput -v0

demo: migrate
	$(BIN)/python manage.py demo --serve 127.0.0.1:8000

lint: install-dev
	$(BIN)/ruff check .

# The dev install `make test` needs, redone only when pyproject.toml changes (CI runs `make test` three times;
# pip's no-op install still builds the editable wheel). `make install-dev` always reinstalls.
DEV_INSTALLED := $(VENV)/.dev-installed
$(DEV_INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

# Parallel (pytest-xdist): TEST_WORKERS=0 runs in one process. `-r s` prints why each skipped test skipped.
TEST_WORKERS ?= auto
test: $(DEV_INSTALLED)
	$(BIN)/ruff check .
# The layer rules of docs/design.md ([tool.importlinter] in pyproject.toml).
	$(BIN)/lint-imports --no-cache
# mypy before the tests: a type error fails in a minute, not after the suite's minutes.
	$(BIN)/mypy
	RCAWEB_DEBUG=false $(BIN)/pytest -q -r s -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# mypy with django-stubs over the application packages alone (`make test` runs it too).
typecheck: install-dev
	$(BIN)/mypy

bench: install-dev
	$(BIN)/python bench/run_all.py

e2e: install-dev
	$(BIN)/pytest tests/e2e -q

clean:
	rm -rf var/ .pytest_cache
