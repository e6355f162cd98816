# The README's two commands: `make demo` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Where `make demo` writes its results (results/<run>/...).
DEMO_RUN ?= demo-resnet50-onnx-cpu

.PHONY: install system-deps demo test test-unit test-integration doctor accuracy clean

install: system-deps $(STAMP)

# perf_analyzer links libb64 (Debian libb64-0d); install it when missing (needs root, as on CI).
system-deps:
	@if ! ldconfig -p | grep -q 'libb64.so.0d'; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq libb64-0d; \
		else echo "perf_analyzer needs libb64: run 'sudo apt-get install libb64-0d'"; exit 1; fi; \
	fi

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip "setuptools<81" wheel
	$(VENV)/bin/pip install -q -e .
	@touch $(STAMP)

demo: install
	$(PY) -m deployment_toolkit.demo --run-name $(DEMO_RUN)

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
