# Two entry points on a fresh machine (Python >= 3.11 with venv):
#   make run   - create .venv, install, run the main job (the cross-process log buffer demo)
#   make test  - create .venv, install with test extras, run the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -n 2

.PHONY: run test clean

$(VENV)/.installed-%: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$*]'
	touch $@

run: $(VENV)/.installed-test
	$(PY) -m aeron_numba.demo

test: $(VENV)/.installed-test
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
