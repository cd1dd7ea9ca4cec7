# Client examples (examples/, docs/INTEGRATION.md) and what their test needs.
#
# tests/integration/test_examples.c runs examples/python with Debian's
# /usr/bin/python3 and python3-redis (PyPI is not needed), examples/node with
# node and the npm package `redis` (npm ci, from examples/node/package-lock.json)
# and examples/redis-cli with sh and redis-cli. `examples-deps` installs what
# is missing -- apt-get only as root, like tools/deps.sh -- and otherwise says
# what to run; the test then skips the language it cannot run, with the reason.

EXAMPLES_DEBS := python3-redis

.PHONY: examples-deps
tests-build: examples-deps

examples-deps:
	@missing=""; \
	for p in $(EXAMPLES_DEBS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" -eq 0 ]; then \
	        echo "examples-deps: installing$$missing"; \
	        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	          apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } || \
	            echo "examples-deps: apt-get install failed for:$$missing (those examples' tests will be skipped)" >&2; \
	    else \
	        echo "examples-deps: missing:$$missing; run: sudo apt-get install -y$$missing" >&2; \
	    fi; \
	fi; \
	if [ ! -d examples/node/node_modules/redis ] && command -v npm >/dev/null 2>&1; then \
	    echo "examples-deps: npm ci --prefix examples/node"; \
	    npm ci --prefix examples/node --no-audit --no-fund --loglevel=error || \
	        echo "examples-deps: npm ci failed (the Node examples' test will be skipped)" >&2; \
	fi
