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

.PHONY: run test lint typecheck-tree bench bench-smoke install-check clean

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

# The acceptance figures: each suite runs its peers in the same process or run and
# writes benchmarks/results/<topic>.json; results_table.py turns them into
# benchmarks/results/RESULTS.md, ratios.png and the README's table. About 1.5 hours
# on a 2-core machine (RMAT-18 graphs; DGL needs ../dgl-env, see benchmarks/peers).
PYTEST_BENCH := $(BIN)/python -m pytest -p no:cacheprovider -s
bench: $(STAMP)
	OMP_WAIT_POLICY=PASSIVE $(PYTEST_BENCH) benchmarks/operators/test_cora_epoch.py
	$(PYTEST_BENCH) benchmarks/engine/test_chain_overhead.py --benchmark-only
	$(PYTEST_BENCH) benchmarks/operators/test_gcn_full_graph.py -m large
	cd benchmarks/operators && ../../$(BIN)/python -m pytest test_sage_sampled.py -m large -s -p no:cacheprovider
	$(BIN)/python benchmarks/partition/balance_bench.py --out benchmarks/results/partition.json
	OPENBLAS_NUM_THREADS=1 $(BIN)/python benchmarks/operators/streaming/run_streaming.py peers --scale 18 --batch-sizes 100 --batches 40 --write
	$(PYTEST_BENCH) benchmarks/operators/test_planner.py -m "slow or not slow"
	$(PYTEST_BENCH) benchmarks/operators/test_cli_startup.py -m "slow or not slow"
	$(BIN)/python benchmarks/operators/rapidgnn_counters.py
	$(BIN)/python benchmarks/operators/run_rapidgnn_throughput.py --rounds 5
	cd benchmarks/operators && ../../$(BIN)/python armada_throughput.py --rounds 5 --epochs 3 --threads 2 --policies default passive
	GREM_RESULTS=benchmarks/results/grem.json $(PYTEST_BENCH) benchmarks/partition/test_grem_acceptance.py -m large
	$(BIN)/python benchmarks/engine/ray_overhead.py --rounds 5 --out benchmarks/results/ray.json
	cd benchmarks/engine && ../../$(BIN)/python bench_ray_gang.py --rounds 5 --out ../results/ray_gang.json
	cd benchmarks/engine && ../../$(BIN)/python bench_multinode.py --rounds 5 --out ../results/multinode_gang.json
	$(PYTEST_BENCH) benchmarks/storage/geo/test_geo_bench.py -m large
	$(BIN)/python benchmarks/results_table.py --readme README.md

# Every benchmark at its smoke size (seconds to minutes): checks they still run.
bench-smoke: $(STAMP)
	$(BIN)/python -m pytest benchmarks -q -p no:cacheprovider --benchmark-only

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .benchmarks
