# make setup: everything a fresh Debian/Ubuntu machine with Python 3.11 needs.
# make test:  setup, then the whole test suite (what CI runs).
# make demo:  setup, then a 2-worker crawl of a bundled site under supervisord.
# make bench: setup, then the benchmarks (not part of make test).

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := redis-server postgresql
STAMP := $(VENV)/.installed

.PHONY: setup test demo bench lint clean

setup: $(STAMP) system-packages

$(STAMP): requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

system-packages:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	{ command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; } || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

test: setup
	$(PY) -m pytest

demo: setup
	$(PY) -m spiders_project.demo

bench: setup
	$(PY) -m tests.bench

lint: setup
	$(VENV)/bin/ruff check spiders_project monitor tests

clean:
	rm -rf $(VENV) .pytest_cache
