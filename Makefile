# The README's two commands: `make demo` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Extra flags for the demo: `make demo DEMO_ARGS=--fast` (CI), `DEMO_ARGS="--output DIR"`. Each demo run writes a
# new folder (default results/local/demo-<model>-onnx-<UTC time>, git-ignored), never over a committed one.
DEMO_ARGS ?=

.PHONY: install system-deps demo test test-e2e test-unit test-integration test-lab doctor accuracy clean gpu-check wheelhouse docs

# Air-gapped hosts (README, "GPU acceptance"): `make wheelhouse` gathers the wheels where an index is reachable;
# `make install WHEELHOUSE=DIR` (and `make gpu-check WHEELHOUSE=DIR`) installs from DIR with no index, into a venv
# that sees the host's packages: a CUDA torch of the host is used as is, never replaced.
WHEELHOUSE ?=
WHEELHOUSE_PYTHON ?= python3.12
WHEELHOUSE_OUT ?= wheelhouse
ifneq ($(strip $(WHEELHOUSE)),)
INSTALL_DEPS := $(VENV)/.wheelhouse-stamp
else
INSTALL_DEPS := system-deps $(STAMP)
endif

install: $(INSTALL_DEPS)

# perf_analyzer links libb64 (Debian libb64-0d); the tests lint the docker scripts with shellcheck. Install what is
# missing (needs root, as on CI); without root, libb64 is required, shellcheck optional.
system-deps:
	@missing=""; \
	ldconfig -p | grep -q 'libb64.so.0d' || missing="$$missing libb64-0d"; \
	command -v shellcheck >/dev/null || missing="$$missing shellcheck"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		elif ! ldconfig -p | grep -q 'libb64.so.0d'; then \
			echo "perf_analyzer needs libb64: run 'sudo apt-get install$$missing'"; exit 1; \
		else echo "not installed:$$missing (shellcheck: the docker-script lint tests skip) - 'sudo apt-get install$$missing'"; fi; \
	fi

# The test, hf and docs extras (pytest; transformers; mkdocs for `make docs` and the test that builds the site): two
# -e of this checkout are one editable install with their extras merged.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip "setuptools<81" wheel
	$(VENV)/bin/pip install -q -e '.[test,hf]' -e '.[docs]'
	@touch $(STAMP)

demo: install
	$(PY) -m deployment_toolkit.demo $(DEMO_ARGS)

# Two phases over the folders $(1) (for the banner: $(2)). First every module but the `exclusive` ones on two
# workers (pytest-xdist, whole files each: a module's server or plan fixture is set up once; the suite waits on
# servers starting and perf_analyzer windows about as much as it computes). Then the modules that judge what the
# host's cores carry (a plan's capacities held against their SLOs and confirmed under mixed traffic), one at a time
# in one process with nothing beside them: beside the other worker's perf_analyzer a plan's capacity held at half of
# what its search had measured (CI). Modules whose models meet their budgets many times over (p99 of 50 ms to
# seconds for models that answer in a few, a rerun that replays) or sleep (a rate that does not depend on how busy
# the cores are) run in the first phase. Both phases run; either failing fails.
# TEST_WORKERS=1 runs the first phase in one process too.
TEST_WORKERS ?= 2
# The first phase runs two workers side by side on purpose: each is the other's neighbour, and its open-loop
# windows check correctness, not capacity, so they record what the other took instead of measuring again
# (perf/neighbours.py); the exclusive phase measures as users do.
NEIGHBOURS_RECORD := DEPLOYMENT_TOOLKIT_NEIGHBOURS=record
define two_phases
	@status=0; \
	echo "== $(2) 1/2: every module but the exclusive ones"; \
	$(NEIGHBOURS_RECORD) $(PY) -m pytest -q -ra --durations=25 -m "not exclusive" $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) $(1) || status=$$?; \
	echo "== $(2) 2/2: the modules that judge what the host carries, one at a time, alone"; \
	$(PY) -m pytest -q -ra --durations=10 -m exclusive $(1) || status=$$?; \
	exit $$status
endef

# The tests in three targets, each its own folder, all three run by .ci/run on every change:
# - `make test`: tests/unit and tests/integration, every function and command of the product, the integration
#   tests on the real tritonserver, perf_analyzer and tritonclient, and one plan from a model to confirmed
#   replicas and manifests (within 15 minutes on 2 cores);
# - `make test-e2e`: tests/e2e, the documented runs end to end as a user starts them (the README's worked example,
#   the docs' Python example, the pipeline examples, `make demo`, `make accuracy`) and a two-model fleet planned,
#   confirmed under mixed traffic and fanned out as Kubernetes jobs;
# - `make test-lab`: the lab's tests (below), `make gpu-check`'s steps on CPU among them.
test: install
	$(call two_phases,tests/unit tests/integration,make test)

test-e2e: install
	$(call two_phases,tests/e2e,make test-e2e)

# the fast tier (under 3 minutes on 2 cores): unit tests without the `slow` ones; `make test` runs them all
test-unit: install
	$(PY) -m pytest -q -ra -m "not slow" tests/unit

test-integration: install
	$(PY) -m pytest -q -ra tests/integration

# The lab's tests (deployment_toolkit_lab/: the toolkit's own benchmarks, the corpus, the comparisons with Model
# Analyzer, the housekeeping of the committed runs); `make test` and `make test-e2e` collect tests/ only. `.ci/run`
# runs all three.
test-lab: install
	$(PY) -m pytest -q -ra --durations=30 tests_lab

# Train a small U-Net on synthetic shapes, deploy it (ONNX, embedded Triton) and show that Triton and the
# framework give the same Dice vs labels.
accuracy: install
	$(PY) triton/accuracy_demo.py

# The docs site (mkdocs.yml, docs/) into site/ (git-ignored), strict: a broken link, anchor or nav entry fails the
# build. The CLI and deployment-file references are generated from the code on the way (docs/gen_reference.py).
# (The two variables keep the theme's and a plugin's banners about MkDocs' future out of the build's output.)
docs: install
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(PY) -m mkdocs build --strict --clean --site-dir site

doctor: install
	$(PY) -m deployment_toolkit doctor

clean:
	rm -rf workspace model_repository/*/ .pytest_cache site

# GPU acceptance in one command: results/gpu-<device-slug>/ (GPU_CHECK_ARGS, e.g. --max-minutes 10 --dry-run). The lab's
# command (`deployment-toolkit-lab gpu-check`): it measures the toolkit itself.
gpu-check: install
	$(PY) -m deployment_toolkit_lab gpu-check $(GPU_CHECK_ARGS)

# No index: the toolkit's pins minus torch/torchvision from WHEELHOUSE, then this checkout (editable, no build env).
$(VENV)/.wheelhouse-stamp: pyproject.toml
	@test -d "$(WHEELHOUSE)" || { echo "WHEELHOUSE=$(WHEELHOUSE) is not a folder: make one with 'make wheelhouse' where an index is reachable"; exit 2; }
	@if [ -x $(PY) ] && ! grep -qi '^include-system-site-packages *= *true' $(VENV)/pyvenv.cfg; then \
		echo "$(VENV) exists without the host's packages: remove it, or pass VENV=another-folder"; exit 2; fi
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) scripts/wheelhouse.py requirements --for install > $(VENV)/requirements-wheelhouse.txt
	$(PY) -m pip install --no-index --find-links $(WHEELHOUSE) -r $(VENV)/requirements-wheelhouse.txt
	$(PY) -m pip install --no-index --find-links $(WHEELHOUSE) --no-build-isolation --no-deps -e .
	$(PY) scripts/wheelhouse.py check-torch
	@ldconfig -p | grep -q 'libb64.so.0d' || echo "perf_analyzer needs libb64: 'sudo dpkg -i $(WHEELHOUSE)/libb64-0d_*.deb' (make wheelhouse downloads it where apt-get can)"
	@touch $(STAMP) $@  # a later `make test` without WHEELHOUSE must not reinstall the pins (torch included) over it

# What an air-gapped host needs beside its own torch, for WHEELHOUSE_PYTHON (its version and this platform):
# pip builds the wheels a registry lacks for that Python (geventhttpclient<=2.0.2 has none for 3.12).
wheelhouse:
	@command -v $(WHEELHOUSE_PYTHON) >/dev/null || { echo "$(WHEELHOUSE_PYTHON) not found: pass WHEELHOUSE_PYTHON=/path/to/the/host's/python-version"; exit 2; }
	mkdir -p $(WHEELHOUSE_OUT)
	$(PYTHON) scripts/wheelhouse.py requirements --for download > $(WHEELHOUSE_OUT)/requirements.txt
	$(PYTHON) scripts/wheelhouse.py requirements --for torch-dependent > $(WHEELHOUSE_OUT)/requirements-no-deps.txt
	$(WHEELHOUSE_PYTHON) -m pip wheel -q --prefer-binary -w $(WHEELHOUSE_OUT) -r $(WHEELHOUSE_OUT)/requirements.txt
	$(WHEELHOUSE_PYTHON) -m pip wheel -q --prefer-binary --no-deps -w $(WHEELHOUSE_OUT) -r $(WHEELHOUSE_OUT)/requirements-no-deps.txt
	$(WHEELHOUSE_PYTHON) -m pip wheel -q --no-deps -w $(WHEELHOUSE_OUT) .
	-cd $(WHEELHOUSE_OUT) && apt-get download libb64-0d
	$(PYTHON) scripts/wheelhouse.py size $(WHEELHOUSE_OUT)
