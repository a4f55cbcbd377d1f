# The commands of the README. `.ci/run` calls `make test`; `make lint` is ruff (lint and
# format check), mypy (through .ci/typecheck, which maps the source folders to `mvtable`),
# the import contracts (.ci/importlint, on the same mapping) and the strict docs build.
PYTHON ?= python3

.PHONY: demo test install-test lint

demo:
	$(PYTHON) -m pip install ".[spark]"
	$(PYTHON) -m mvtable.connector.demo

# two tools of the suite come from Debian (installed here when running as root): chromium, in
# which the timeline's browser test opens its page, and strace, with which the partitions
# benchmark's smoke test counts the data files each system's replace opens
install-test:
	$(PYTHON) -m pip install -e ".[test]"
	@missing=""; for tool in chromium strace; do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
		else \
			echo "missing:$$missing (the tests that need them will fail); as root: apt-get install -y --no-install-recommends$$missing" >&2; \
		fi; \
	fi

# lint first: a finding fails the run before the (long) suite starts. The suite runs on
# TEST_WORKERS pytest-xdist workers (each with its own Spark session and S3 servers; a module,
# and the tests of the standalone cluster, stay on one worker: see tests/conftest.py).
TEST_WORKERS ?= 2
test: install-test lint
	MVTABLE_REQUIRE_S3=1 $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) .ci/typecheck
	$(PYTHON) .ci/importlint
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --quiet
