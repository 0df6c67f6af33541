# signoff — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
PACKAGES := shared/contracts shared/runtime shared/conformance cli client \
	examples/card_provider examples/club examples/scripted_model \
	services/proposals services/executor services/reconciler services/agent web
PYPROJECTS := $(foreach p,$(PACKAGES),$(p)/pyproject.toml)

.PHONY: run test check install services requirements lint types schemas bench soak faults timeline

$(VENV)/.installed: requirements/requirements.txt requirements/bootstrap.txt $(PYPROJECTS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r requirements/bootstrap.txt
	$(UV) pip install -q --python $(PY) --require-hashes -r requirements/requirements.txt
	$(UV) pip install -q --python $(PY) --no-deps $(foreach p,$(PACKAGES),-e $(p))
	@# bytecode once, here: with PYTHONDONTWRITEBYTECODE set (as on CI's machines) every process
	@# the tests spawn would otherwise compile all it imports again (~40 % of a service's start)
	-$(PY) -m compileall -q -j 0 $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
		$(foreach p,$(PACKAGES),$(p)/src) > /dev/null
	touch $@

install: $(VENV)/.installed

services:
	@deploy/local/ensure-services.sh

## run: the whole system on this machine until Ctrl-C
run: install services
	$(VENV)/bin/signoff dev run

## test: the test suite (two workers: each test module owns its database, queues and ports)
test: install services
	$(PY) -m pytest -q -n 2 --dist loadfile

## bench: signoff beside the raw limit and LangGraph; writes docs/benchmarks.md (BENCH_* sizes)
bench: install services
	PYTHONPATH=bench $(PY) -m signoff_bench

## soak: signoff under a steady mixed load, sampled each minute; writes its table into
## docs/benchmarks.md (BENCH_SOAK_MINUTES, default 20; BENCH_SOAK_RATE, default half the
## committed open-loop result; BENCH_SOAK_SAMPLE_S, default 60)
soak: install services
	PYTHONPATH=bench $(PY) -m signoff_bench.soak

## timeline: one approval at a time, each hop's time from the services' spans and the database's
## clock (BENCH_TIMELINE_N, default 200; BENCH_TIMELINE_WARMUP, 10; BENCH_TIMELINE_GAP_MS, 50);
## prints the table. `PYTHONPATH=bench $(PY) -m signoff_bench.timeline REF ...`: commits side by side
timeline: install services
	PYTHONPATH=bench $(PY) -m signoff_bench.timeline

## faults: the long fault-injection run (every scenario and negative control, SIGNOFF_FAULTS_*
## sizes and seed); writes its results table into docs/reliability.md
faults: install
	SIGNOFF_FAULTS=long SIGNOFF_FAULTS_WRITE_DOCS=1 $(PY) -m pytest -q tests/faults

lint: install
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

# mypy strict over the packages; over the tests too, strict but for two things (documented here
# and in pyproject.toml): a test's parameters need no annotations (pytest injects fixtures by
# name; every body is still checked, --check-untyped-defs), and a helper may return what it read
# from a row or a JSON body as Any (no-any-return). A suite that puts its own directory on
# sys.path is checked with that directory as its base (MYPYPATH), one such suite per run, so its
# helpers (e2e_stack, faults_*, proposals_testkit ...) are typed and two conftest.py never clash.
TEST_MYPY := $(VENV)/bin/mypy --allow-untyped-defs --allow-incomplete-defs --check-untyped-defs \
	--disable-error-code no-any-return
types: install
	$(VENV)/bin/mypy $(foreach p,$(notdir $(PACKAGES)),-p signoff_$(subst -,_,$(p)))
	$(TEST_MYPY) tests/contract services/reconciler/tests shared/*/tests examples/*/tests \
		web/tests bench/tests client/tests
	MYPYPATH=services/proposals/tests/support:services/agent/tests/support \
		$(TEST_MYPY) services/proposals/tests services/agent/tests
	MYPYPATH=services/executor/tests $(TEST_MYPY) services/executor/tests
	MYPYPATH=tests/e2e:tests/deploy $(TEST_MYPY) tests/e2e
	MYPYPATH=tests/faults $(TEST_MYPY) tests/faults
	MYPYPATH=tests/deploy $(TEST_MYPY) tests/deploy
	MYPYPATH=tests/e2e:tests/security/insider $(TEST_MYPY) tests/security

## check: what CI runs (.ci/run): format, lint, types — the tests' code too — then the tests
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
