# fleetcache: the two commands of the quick start are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv debian-deps demo test unit functional integration tempest db-test lint genconfig stack-up stack-down bench clean

venv: $(STAMP)

# A fresh Debian lacks python3-venv (ensurepip): installed first; a venv left without pip by
# a failed `python3 -m venv` is made again.
$(STAMP): setup.cfg pyproject.toml test-requirements.txt
	test -x $(BIN)/pip || $(PYTHON) -c 'import ensurepip' 2>/dev/null || tools/install-debian-deps.sh venv
	test -x $(BIN)/pip || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[postgresql,mysql,demo]' -r test-requirements.txt
	touch $(STAMP)

# Debian packages the tests need (qemu-utils, Ceph...), and Debian's rados/rbd bindings linked
# into the venv (they are not on PyPI; tools/ceph-bindings.sh says why a link).
debian-deps: venv
	tools/install-debian-deps.sh
	tools/ceph-bindings.sh $(VENV)

demo: venv
	$(BIN)/fleetcache demo

# Unit and functional tests, then on the real local stack (RabbitMQ, PostgreSQL, MariaDB,
# Keystone, Glance and Placement in their venvs, the WSGI server behind nginx, the daemons):
# OpenStack's Tempest on the compute API (pinned, its own venv: docs/api.md, "Tempest"), the
# integration tests, and every benchmark once at a tiny size (no figure judged: a bench that no
# longer runs fails the target). Each pytest run lists its 20 slowest tests: a fresh clone's
# run took 70 min on 2026-11-30 (unit + functional 20, Tempest 4, integration 40), and CI
# allows 90.
test: debian-deps
	tools/test-services.sh
	$(BIN)/pytest -q -p no:cacheprovider --durations=20 tests/unit tests/functional
	FLEETCACHE_TEMPEST=1 FLEETCACHE_BENCH_SMOKE=1 tools/run-integration.sh

unit: debian-deps
	$(BIN)/pytest -q tests/unit

functional: venv
	$(BIN)/pytest -q tests/functional

integration: debian-deps
	tools/test-services.sh
	tools/run-integration.sh

# Tempest (OpenStack's compute API conformance suite, pinned, in its own venv) on the local
# stack, started and stopped around it: tools/tempest/selection.txt minus exclusion.txt, the
# results per group (docs/api.md, "Tempest"); `test` runs the same on its stack.
tempest: debian-deps
	tools/test-services.sh
	tools/tempest.sh --with-stack

lint: venv
	$(BIN)/ruff check fleetcache tests bench tools
	$(BIN)/mypy
	$(BIN)/python tools/check_imports.py

genconfig: venv
	$(BIN)/oslo-config-generator --namespace fleetcache --namespace oslo.messaging \
	    --namespace oslo.log --namespace keystonemiddleware.auth_token --namespace oslo.limit \
	    --output-file etc/fleetcache/fleetcache.conf.sample
	$(BIN)/oslopolicy-sample-generator --namespace fleetcache \
	    --output-file etc/fleetcache/policy.yaml.sample

stack-up: venv
	tools/stack.sh up

stack-down:
	tools/stack.sh down

# Every benchmark, each with what it needs (the local stack for download.py) started and
# stopped by bench/run.sh; `bench/run.sh NAME` runs one, `bench/run.sh --smoke` each at a
# tiny size.
bench: debian-deps
	bench/run.sh

clean:
	rm -rf $(VENV) .stack
