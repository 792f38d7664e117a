# make setup: everything a fresh Debian/Ubuntu machine with Python 3.11 needs.
# make test:  setup, lint, then the whole test suite (what CI runs).
# make demo:  setup, then a 2-worker crawl of a bundled site under supervisord.
# make bench: setup, then the benchmarks (not part of make test; under 10 minutes on 2 cores).
# make bench-quick: the hot path's figures against their targets, in about five minutes.
# make bench-profile: where Redis spends its time per page (tests/bench/profile.py).
# make docs:  regenerate docs/SETTINGS.md from spiders_project/settings.py.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pywb, the WARC replay tool (docs/ARCHIVE.md), pins redis-py 2.10.6: a virtualenv of its own.
REPLAY_VENV := .venv-replay
REPLAY_STAMP := $(REPLAY_VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-packages test test-container demo bench bench-quick bench-profile lint docs clean

setup: system-packages $(STAMP) $(REPLAY_STAMP)

# Debian packages the crawler and its tests run: Redis, PostgreSQL (tests
# start private clusters), Chromium (rendering), Prometheus (monitor tests),
# libfaketime (a worker whose clock is off), iproute2 and iptables (network
# faults: tests/support/netns.py, the node-health test), systemd for its
# systemd-analyze (the deploy/systemd units are verified; the package does not
# make systemd the init, that is systemd-sysv).
system-packages:
	@missing=""; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v iptables >/dev/null || missing="$$missing iptables"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null || missing="$$missing postgresql"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	test -x /usr/lib/chromium/chromium-headless-shell || missing="$$missing chromium-headless-shell"; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing="$$missing faketime"; \
	$(PYTHON) -c "import ensurepip, venv" 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  echo "make setup: installing$$missing with apt-get"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

$(REPLAY_STAMP): requirements-replay.txt
	test -x $(REPLAY_VENV)/bin/python || $(PYTHON) -m venv $(REPLAY_VENV)
	$(REPLAY_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-replay.txt
	touch $(REPLAY_STAMP)

# Three test processes (pytest-xdist) on CI's 2 cores: most tests wait on the
# processes they start (a whole run keeps 1.3 cores busy), so a third process
# fills the waits. worksteal keeps all of them busy to the end.
test: setup lint
	$(PY) -m pytest -n 3 --dist worksteal --durations=15

# The container image (deploy/container/), then a crawl by it: two worker containers and
# a db_writer container against a private Redis and the demo site on this host
# (tests/container; podman as root, which this target installs when missing). Not part
# of make test; CI runs it after.
CONTAINER_IMAGE ?= localhost/spiders-project:latest
test-container: setup
	deploy/container/build-image $(CONTAINER_IMAGE)
	CRAWLER_IMAGE=$(CONTAINER_IMAGE) $(PY) -m pytest tests/container -v --durations=5
	@$(SUDO) podman image inspect --format '{{.Size}}' $(CONTAINER_IMAGE) \
	  | awk '{ printf "image $(CONTAINER_IMAGE): %d bytes (%.0f MB)\n", $$1, $$1 / 1e6 }'

demo: setup
	$(PY) -m spiders_project.demo $(DEMO_ARGS)

bench: setup
	$(PY) -m tests.bench $(BENCH_ARGS)

# The hot path's figures in about three minutes (three crawl pairs); exits 1 when one is worse than
# its target (tests/bench/quick.py).
bench-quick: setup
	$(PY) -m tests.bench.quick $(QUICK_ARGS)

# Redis' time per crawled page by script and command (SLOWLOG), e.g.
# make bench-profile PROFILE_ARGS="--rounds 3 --against <commit>"
bench-profile: setup
	$(PY) -m tests.bench.profile $(PROFILE_ARGS)

# ruff on all the code; mypy strict on the product (files and options in pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check spiders_project monitor tests
	$(VENV)/bin/ruff format --check spiders_project monitor tests
	$(VENV)/bin/mypy

# docs/SETTINGS.md from the comments and defaults of spiders_project/settings.py
# (a unit test fails while it is stale).
docs: setup
	$(PY) -m spiders_project.settings_doc

clean:
	rm -rf $(VENV) $(REPLAY_VENV) .pytest_cache .mypy_cache run data/demo-items.db
