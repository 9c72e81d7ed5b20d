# Two commands on a fresh machine:  `make run` (set up, open the app)  and  `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.specprefill-installed

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup run test demo lint-imports clean-venv

# Idempotent: the venv, torch (the CPU wheel on disk), the patched llama-cpp-python wheel
# (built once, cached under ~/.cache/specprefill/wheels), the project, the default models.
setup: $(STAMP)
	$(PY) -m engine.cli models --prepare

$(STAMP): pyproject.toml packaging/build_llama_wheel.py packaging/llama-cpp-gapped-positions.patch
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
		"$$($(PY) packaging/build_llama_wheel.py | tail -n 1)"
	$(PY) -m pip install -q --disable-pip-version-check -e ".[test]"
	touch $(STAMP)

run: setup
	$(VENV)/bin/specprefill-gui

demo: setup
	$(VENV)/bin/specprefill run --doc engine/eval/calibration_sample.md --force --max-new-tokens 64 \
		--question "What is this document about? Answer in two sentences."

lint-imports: $(STAMP)
	$(VENV)/bin/lint-imports

test: setup lint-imports
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider

clean-venv:
	rm -rf $(VENV)
