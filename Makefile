# The two commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint typecheck unit clean tour proto browser screenshots

$(STAMP): pyproject.toml $(wildcard proto/cairn/*/*/*.proto)
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The tour on a throwaway store, then the server on ./.cairn (created on first run, which
# prints its keys once). Ctrl-C stops the server cleanly.
run: $(STAMP)
	$(BIN)/cairn tour
	test -f .cairn/principals.yaml || $(BIN)/cairn init
	$(BIN)/cairn serve

lint: $(STAMP)
	$(BIN)/ruff check src tests bench proto
	$(BIN)/ruff format --check src tests bench proto

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) browser
	$(BIN)/pytest -n 2 -q

test: lint typecheck unit

# Debian's chromium for the console's browser tests (they skip, saying so, without it).
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium) \
		|| echo "could not install chromium: the browser tests will skip"

# The console's screenshots in docs/ui, taken by its browser tests.
screenshots: $(STAMP) browser
	CAIRN_UI_SCREENSHOTS=docs/ui $(BIN)/pytest -q tests/web/test_browser.py

# Regenerate src/cairn/doors/grpc_gen from proto/ after editing a proto (every install does
# it too; a test fails while they differ).
proto: $(STAMP)
	$(BIN)/python proto/generate.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
