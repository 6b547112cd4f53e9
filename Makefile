# Two entry points on a fresh machine (Python >= 3.11 with venv):
#   make run   - create .venv, install the package alone, run the main job (driver + publisher + subscriber)
#   make test  - create .venv, install with test extras, run the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -n 2

.PHONY: run test test-nojit clean

# The package alone (numpy, numba): what a user of it installs; the extras only for the tests and benchmarks.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-%: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$*]'
	touch $@

run: $(VENV)/.installed
	$(PY) -m aeron_numba demo

# The Spark tests need Java 17+: say what to install before anything runs.
test: $(VENV)/.installed-test
	$(PY) -m aeron_numba.spark.session
	$(VENV)/bin/lint-imports --no-logo
	$(PY) -m pytest $(PYTEST_ARGS)

# Kernels as plain Python (coverage, debugging); cross-process atomicity tests are skipped there.
test-nojit: $(VENV)/.installed-test
	NUMBA_DISABLE_JIT=1 $(PY) -m pytest $(PYTEST_ARGS) tests/unit

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
