# The two commands: `make demo` and `make test`. Both create .venv and install the project on first
# use; the stamp file makes later runs skip the install until pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test docs docs-check screenshots bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "footprint needs Python 3.11 or newer (found " + sys.version.split()[0] + ")")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing footprint and its dependencies into $(VENV) (first run only)..."
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@# setuptools warns on every editable install that a folder named like a package may shadow it (here
	@# it is the package): said once, here, instead of a block of warnings on every first `make demo`.
	@PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	@$(BIN)/footprint demo

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/lint-imports
	$(BIN)/ruff check tracer agent hosting explorer tests bench
	$(BIN)/mypy
	@$(MAKE) --no-print-directory docs-check

# The site built strictly into a scratch directory (make test runs it). Not --quiet: that drops the
# warnings, and with them what --strict fails on (a broken link, a page left out of the nav).
docs-check: $(STAMP)
	@NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .site-check >.site-check.log 2>&1 \
		|| { cat .site-check.log; rm -rf .site-check .site-check.log; exit 1; }
	@rm -rf .site-check .site-check.log && echo "docs: built strictly"

# The guide as a website in site/ (open site/index.html); strict: a broken link or page fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The explorer screenshots in docs/ are copies of its snapshot tests' SVGs: refresh both.
screenshots: $(STAMP)
	$(BIN)/python -m pytest -q tests/explorer/test_snapshots.py --snapshot-update
	$(BIN)/python tests/explorer/test_screenshots.py

bench: $(STAMP)
	$(BIN)/python bench/record.py
	$(BIN)/python bench/loop.py
	$(BIN)/python bench/host.py
	$(BIN)/python bench/explorer.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache footprint.duckdb site
