# signoff — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
PACKAGES := shared/contracts shared/runtime shared/conformance cli \
	examples/card_provider examples/club examples/scripted_model \
	services/proposals services/executor services/reconciler services/agent web
PYPROJECTS := $(foreach p,$(PACKAGES),$(p)/pyproject.toml)

.PHONY: run test check install services requirements lint types schemas bench faults

$(VENV)/.installed: requirements/requirements.txt requirements/bootstrap.txt $(PYPROJECTS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r requirements/bootstrap.txt
	$(UV) pip install -q --python $(PY) --require-hashes -r requirements/requirements.txt
	$(UV) pip install -q --python $(PY) --no-deps $(foreach p,$(PACKAGES),-e $(p))
	touch $@

install: $(VENV)/.installed

services:
	@deploy/local/ensure-services.sh

## run: the whole system on this machine until Ctrl-C
run: install services
	$(VENV)/bin/signoff dev run

## test: everything CI runs (two workers: each test module owns its database, queues and ports)
test: install services
	$(PY) -m pytest -q -n 2 --dist loadfile

## bench: signoff beside the raw limit and LangGraph; writes docs/benchmarks.md (BENCH_* sizes)
bench: install services
	PYTHONPATH=bench $(PY) -m signoff_bench

## faults: the long fault-injection run (every scenario and negative control, SIGNOFF_FAULTS_*
## sizes and seed); writes its results table into docs/reliability.md
faults: install
	SIGNOFF_FAULTS=long SIGNOFF_FAULTS_WRITE_DOCS=1 $(PY) -m pytest -q tests/faults

lint: install
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

types: install
	$(VENV)/bin/mypy $(foreach p,$(notdir $(PACKAGES)),-p signoff_$(subst -,_,$(p)))

## check: format, lint, types, tests
check: lint types test

## requirements: re-pin third-party dependencies (hashes, no index URLs): requirements.txt, the
## developers' whole set, then each image's set within it (one version of a package everywhere)
IMAGE_SETS := runtime agent web simulators tools
COMPILE := $(UV) pip compile --generate-hashes --no-annotate --no-header -q --python-version 3.11
requirements:
	$(COMPILE) requirements/requirements.in -o requirements/requirements.txt
	for set in $(IMAGE_SETS); do \
		$(COMPILE) requirements/$$set.in -c requirements/requirements.txt -o requirements/$$set.txt \
		|| exit 1; \
	done
	$(COMPILE) requirements/bootstrap.in -o requirements/bootstrap.txt
