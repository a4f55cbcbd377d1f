# The commands of the README. `.ci/run` calls `make test`; `make lint` is ruff (lint and
# format check), mypy (through .ci/typecheck, which maps the source folders to `mvtable`),
# the import contracts (.ci/importlint, on the same mapping) and the strict docs build.
PYTHON ?= python3

.PHONY: demo test install-test lint

demo:
	$(PYTHON) -m pip install ".[spark]"
	$(PYTHON) -m mvtable.connector.demo

install-test:
	$(PYTHON) -m pip install -e ".[test]"

# lint first: a finding fails the run before the (long) suite starts
test: install-test lint
	MVTABLE_REQUIRE_S3=1 $(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) .ci/typecheck
	$(PYTHON) .ci/importlint
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --quiet
