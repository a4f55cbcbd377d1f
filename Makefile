# The two commands of the README. `.ci/run` calls `make test`.
PYTHON ?= python3

.PHONY: demo test install-test lint

demo:
	$(PYTHON) -m pip install ".[spark]"
	$(PYTHON) -m mvtable.connector.demo

install-test:
	$(PYTHON) -m pip install -e ".[test]"

test: install-test
	MVTABLE_REQUIRE_S3=1 $(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
