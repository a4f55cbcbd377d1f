# The commands of the README. `.ci/run` calls `make test`; `make lint` is ruff (lint and
# format check), mypy (through .ci/typecheck, which maps the source folders to `mvtable`),
# the import contracts (.ci/importlint, on the same mapping) and the strict docs build.
PYTHON ?= python3

.PHONY: demo test install-test lint

demo:
	$(PYTHON) -m pip install ".[spark]"
	$(PYTHON) -m mvtable.connector.demo

# the timeline's browser test opens its page in Debian's chromium (installed here when running as root)
install-test:
	$(PYTHON) -m pip install -e ".[test]"
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; \
		else \
			echo "chromium is missing: the timeline's browser test will fail; as root: apt-get install -y --no-install-recommends chromium" >&2; \
		fi; \
	fi

# lint first: a finding fails the run before the (long) suite starts
test: install-test lint
	MVTABLE_REQUIRE_S3=1 $(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) .ci/typecheck
	$(PYTHON) .ci/importlint
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --quiet
