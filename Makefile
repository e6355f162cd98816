# The README's two commands: `make demo` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Extra flags for the demo: `make demo DEMO_ARGS=--fast` (CI), `DEMO_ARGS="--output DIR"`. Each demo run writes a
# new folder (default results/local/demo-<model>-onnx-<UTC time>, git-ignored), never over a committed one.
DEMO_ARGS ?=

.PHONY: install system-deps demo test test-unit test-integration doctor accuracy clean

install: system-deps $(STAMP)

# perf_analyzer links libb64 (Debian libb64-0d); the tests lint the docker scripts with shellcheck; the fleet
# check (size_fleet.py --confirm-fleet) puts nginx in front of the replicas as a gRPC load balancer (it is run
# from a temp folder on loopback, never as the system service). Install what is missing (needs root, as on CI);
# without root, libb64 is required, shellcheck and nginx optional.
system-deps:
	@missing=""; \
	ldconfig -p | grep -q 'libb64.so.0d' || missing="$$missing libb64-0d"; \
	command -v shellcheck >/dev/null || missing="$$missing shellcheck"; \
	command -v nginx >/dev/null || test -x /usr/sbin/nginx || missing="$$missing nginx"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		elif ! ldconfig -p | grep -q 'libb64.so.0d'; then \
			echo "perf_analyzer needs libb64: run 'sudo apt-get install$$missing'"; exit 1; \
		else echo "not installed:$$missing (shellcheck: the docker-script lint tests skip; nginx: the fleet check and its test skip) - 'sudo apt-get install$$missing'"; fi; \
	fi

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip "setuptools<81" wheel
	$(VENV)/bin/pip install -q -e .
	@touch $(STAMP)

demo: install
	$(PY) -m deployment_toolkit.demo $(DEMO_ARGS)

test: install
	$(PY) -m pytest -q -ra tests

test-unit: install
	$(PY) -m pytest -q -ra tests/unit

test-integration: install
	$(PY) -m pytest -q -ra tests/integration

# Train a small U-Net on synthetic shapes, deploy it (ONNX, embedded Triton) and show that Triton and the
# framework give the same Dice vs labels.
accuracy: install
	$(PY) triton/accuracy_demo.py

doctor: install
	$(PY) -m deployment_toolkit doctor

clean:
	rm -rf workspace model_repository/*/ .pytest_cache
