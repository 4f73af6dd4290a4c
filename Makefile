# The README's quick start: `make run` runs the main job, `make test` runs the checks
# and the tests (what CI runs: bash .ci/run). Both create .venv when it is missing and
# install the CPU build of torch plus the project.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# mypy reads the packages under their installed names (strata.*) through links.
TREE := build/typecheck/strata
PACKAGES := engine operators storage partition jobs

.PHONY: run test lint typecheck-tree bench install-check clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip uninstall --quiet --yes strata 2>/dev/null || true  # the old dist name
	$(BIN)/pip install --quiet -e '.[dev]'
	# numba's on-disk caches name modules; drop any from before the strata.* names
	find $(PACKAGES) \( -name '*.nbi' -o -name '*.nbc' \) -delete
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/strata run jobs/cora_gcn.py --report run-report.json

typecheck-tree:
	mkdir -p $(TREE)
	for p in $(PACKAGES); do ln -sfn ../../../$$p $(TREE)/$$p; done

lint: $(STAMP) typecheck-tree
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q

# A plain (non-editable) install in a fresh venv beside a PyPI package named
# `partition`: the strata.* namespace works from outside the checkout.
install-check:
	bash .ci/install-check

bench: $(STAMP)
	$(BIN)/python -m pytest benchmarks -q -p no:cacheprovider --benchmark-only

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .benchmarks
