# make demo: set up everything and run the main example (a distributed D4PG agent learning
#            Pendulum, launched locally as processes: about 4 minutes).
# make test: set up everything and run the whole test suite (and again on Python 3.13 with the
#            newest TensorFlow, and the Acme acceptance suite).
# make test-acme: Acme 0.4.0's own Launchpad tests and its distributed agents, run unchanged on ours.
# make test-upstream: Launchpad's own tests and examples, from its released wheels, run unchanged
#            on ours (part of make test: the main suite runs tests/upstream).
# make test-examples: the examples' longer runs (ResNet's other modes and its accuracy).
# make lint: ruff over the package, the tests, the examples and the benchmarks.
# make docs: the documentation (docs/, README.md's blocks, the API reference from the
#            docstrings) built as a site, offline, into site/; any warning fails it.
# make compat-wheels: stand-in wheels of dm-launchpad and dm-launchpad-nightly (metadata
#            only, requiring launchpad-next) into dist/compat-wheels/, for
#            `pip install --find-links dist/compat-wheels PACKAGE` (docs/migrating.md).

PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo $(HOME)/.pyenv)
PY311 := $(firstword $(wildcard $(PYENV_ROOT)/versions/3.11*/bin/python3.11) $(shell command -v python3.11))
PY313 := $(firstword $(wildcard $(PYENV_ROOT)/versions/3.13*/bin/python3.13))
VENV := .venv
VENV313 := .venv313
VENV_ACME := .venv-acme
COMPAT_WHEELS ?= dist/compat-wheels
PIP_FLAGS := --quiet --disable-pip-version-check
# The main venv has the full stack (the `tensorflow` and `reverb` extras of pyproject.toml:
# TensorFlow 2.15, Reverb 0.14, numpy < 2, protobuf 4.25; the `examples`, `ray` and
# `kubernetes` extras, and `docs`); the 3.13 venv has the newest TensorFlow (2.21, Keras 3: its
# `tensorflow` extra there) and the `examples` extra on the newest grpcio/protobuf, but no
# Reverb (none exists for it), so both ends of the supported range are tested.

.PHONY: demo test test-main test-examples test-upstream test-core313 test-acme venv313 \
	test-beside-main system-packages lint bench docs compat-wheels clean

# System packages the tests use, installed when missing: tmux (for the tmux_session terminal);
# Slurm, munge and iproute2 (for the Slurm cluster on network namespaces of tests/cluster);
# graphviz (its `dot` draws the pictures of programs: tests/test_dot.py, tests/test_cli_graph.py);
# chromium and chromium-driver (the dashboard's page is tested in a headless Chromium).
system-packages:
	@PATH="$$PATH:/usr/sbin:/sbin"; pkgs=""; \
	command -v tmux >/dev/null || pkgs="$$pkgs tmux"; \
	command -v slurmctld >/dev/null || pkgs="$$pkgs slurmctld"; \
	command -v slurmd >/dev/null || pkgs="$$pkgs slurmd"; \
	command -v sbatch >/dev/null || pkgs="$$pkgs slurm-client"; \
	command -v munged >/dev/null || pkgs="$$pkgs munge"; \
	command -v ip >/dev/null || pkgs="$$pkgs iproute2"; \
	command -v dot >/dev/null || pkgs="$$pkgs graphviz"; \
	command -v chromium >/dev/null || pkgs="$$pkgs chromium"; \
	command -v chromedriver >/dev/null || pkgs="$$pkgs chromium-driver"; \
	test -z "$$pkgs" || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs; }

$(VENV)/.installed: pyproject.toml
	@test -n "$(PY311)" || { echo "Python 3.11 not found (pyenv or python3.11)"; exit 1; }
	test -x $(VENV)/bin/python || $(PY311) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_FLAGS) --upgrade pip
	$(VENV)/bin/pip install $(PIP_FLAGS) -e '.[dev,tensorflow,reverb,examples,ray,kubernetes,docs]'
	touch $@

$(VENV313)/.installed: pyproject.toml
	$(PY313) -m venv $(VENV313)
	$(VENV313)/bin/pip install $(PIP_FLAGS) --upgrade pip
	$(VENV313)/bin/pip install $(PIP_FLAGS) -e '.[dev,tensorflow,examples]' --upgrade grpcio protobuf
	touch $@

# The acceptance suite's venv: our `reverb` extra, Acme 0.4.0 (without its pins, which are for
# TF 2.8) and the versions of its dependencies that work on this stack (tests/acme/requirements.txt).
$(VENV_ACME)/.installed: pyproject.toml tests/acme/requirements.txt
	@test -n "$(PY311)" || { echo "Python 3.11 not found (pyenv or python3.11)"; exit 1; }
	test -x $(VENV_ACME)/bin/python || $(PY311) -m venv $(VENV_ACME)
	$(VENV_ACME)/bin/pip install $(PIP_FLAGS) --upgrade pip
	$(VENV_ACME)/bin/pip install $(PIP_FLAGS) -e '.[reverb]' -r tests/acme/requirements.txt
	$(VENV_ACME)/bin/pip install $(PIP_FLAGS) --no-deps dm-acme==0.4.0
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/python -m examples.d4pg.launch --lp_launch_type=local_mp --max_actor_steps=20000

# The suites run two at a time: the main suite, and beside it the Acme suite then the 3.13
# run. Their tests mostly wait on one process at a time (a node importing TensorFlow, a
# launch starting its processes): alone, the main suite keeps two cores about half busy
# (measured over tests/launch). The venvs are made one at a time (each editable install
# writes the checkout's egg-info): the main one and the 3.13 one first, Acme's beside the
# main suite.
# The examples' longer runs (marked long_example: their other modes and their accuracy) are
# `make test-examples`: the same trainer's modes are tested in every run by
# tests/launch/test_replicated.py, and the examples' learning by benchmarks/.
test: system-packages $(VENV)/.installed
	$(MAKE) venv313
	$(MAKE) -j2 test-main test-beside-main

test-beside-main: test-acme
	$(MAKE) test-core313

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check launchpad courier tests examples benchmarks

test-main: lint
	$(VENV)/bin/python -m pytest -q -rs --durations=15 -m "not long_example" tests

test-examples: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q -rs -m long_example tests/examples

# Launchpad's own *_test.py files and examples (dm-launchpad 0.5.2 and its last nightly),
# downloaded at test time with `pip download --no-deps` into .upstream/ (git-ignored), run
# unchanged over ours (tests/upstream/exclusions.py: what does not run, and why). The main
# suite runs them too.
test-upstream: system-packages $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q -rs --durations=10 tests/upstream

# The suite once more on Python 3.13 with the newest grpcio/protobuf and TensorFlow, when 3.13
# exists (the replicator, ReplicatedNode and TensorFlow examples on Keras 3; Reverb's tests
# skip), with every call on gRPC (LAUNCHPAD_COURIER_TRANSPORT=grpc; the courier suite still
# runs each transport): the launch tests then pass with the fast transports forced off, and
# the gRPC transport's use of grpcio's Cython layer is tested on the newest grpcio. The tests
# of real cluster engines (marked slurm, ray, kubernetes: daemons, pods in namespaces) run in
# the main venv only: their launchers' code is the same on every Python, and running them
# twice would take make test past its 40 minutes;
# so do the examples' longer runs (marked long_example: the same trainer's modes are tested
# here by tests/launch/test_replicated.py).
# The tools around the runtime - the CLI, the pictures, the dashboard, the live table, the
# docs - are pure Python with nothing of the Python, grpcio or TensorFlow version in them, and the
# fault matrix, fuzzing, soak and token checks test the launchers' and courier's own logic
# (the courier suite itself runs here): main venv only.
# Launchpad's own tests (tests/upstream) are written for Python <= 3.10 (assertRaisesRegexp,
# gone in 3.12) and run where Reverb does: main venv only.
MAIN_VENV_ONLY := tests/cli tests/test_dot.py tests/test_cli_graph.py tests/upstream \
	tests/launch/dashboard tests/launch/local/test_live_status.py tests/fuzz tests/soak \
	tests/launch/test_faults.py tests/launch/test_token_exposure.py \
	tests/launch/test_processes.py tests/test_docs.py
venv313:
	@if [ -n "$(PY313)" ]; then $(MAKE) $(VENV313)/.installed; fi

test-core313:
	@if [ -n "$(PY313)" ]; then \
	  $(MAKE) $(VENV313)/.installed && \
	  LAUNCHPAD_COURIER_TRANSPORT=grpc $(VENV313)/bin/python -m pytest -q -rs --durations=15 \
	    -m "not slurm and not ray and not kubernetes and not long_example" \
	    $(MAIN_VENV_ONLY:%=--ignore=%) tests; \
	else echo "Python 3.13 not found: skipping the 3.13 run"; fi

# Acme's own Launchpad tests and distributed agents (tests/acme/test_acme.py).
test-acme: $(VENV_ACME)/.installed
	$(VENV_ACME)/bin/python -m pytest -q -rs tests/acme

bench: system-packages $(VENV)/.installed
	$(VENV)/bin/python -m benchmarks.courier_rpc
	$(VENV)/bin/python -m benchmarks.launch
	$(VENV)/bin/python -m benchmarks.reverb_node
	$(VENV)/bin/python -m benchmarks.replicator
	$(VENV)/bin/python -m benchmarks.model_parallel
	$(VENV)/bin/python -m benchmarks.telemetry_overhead
	$(VENV)/bin/python -m benchmarks.soak_courier
	$(VENV)/bin/python -m benchmarks.group_calls
	$(VENV)/bin/python -m benchmarks.es_resume
	$(VENV)/bin/python -m benchmarks.chaos
	$(VENV)/bin/python -m benchmarks.launch_slurm  # as root: it starts its own Slurm
	$(VENV)/bin/python -m benchmarks.controller_scale

# The site (mkdocs.yml): the API reference is read from the sources by mkdocstrings, which
# imports neither launchpad nor TensorFlow; nothing is fetched. tests/test_docs.py builds it too.
docs: $(VENV)/.installed
	$(VENV)/bin/mkdocs build --strict --site-dir site

# The stand-ins (launchpad/standin_wheels.py: one wheel per dm-launchpad release and the last
# nightly) are written by the module run as a file, isolated (-I: nothing of the checkout is
# imported), by any Python 3: nothing to install first, a fraction of a second; the same bytes
# every time. tests/test_dm_launchpad_standin.py installs packages through them.
compat-wheels:
	$(or $(PY311),python3) -I launchpad/standin_wheels.py $(COMPAT_WHEELS)

clean:
	rm -rf $(VENV) $(VENV313) $(VENV_ACME) *.egg-info test-artifacts .upstream site \
	  dist/compat-wheels
