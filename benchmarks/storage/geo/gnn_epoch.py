"""A sampled GNN epoch reading its features through a GeoStore (issue 19, item 3).

Cora (2,708 nodes, 1,433 float32 features: 5.7 KB a row) is spread over the five
Table I regions (seeded random homes; the 10% highest-degree nodes replicated in every
region), served by one region-server process per region at time scale ``s``
(default 0.2, spec §3.4). A 2-layer GraphSAGE trains on sampled mini-batches
(fan-outs 10, 5; batch 64; no prefetch thread, so every gather is on the critical
path) three ways, in the same run and interleaved per round:

* ``memory``: the in-memory feature store (the baseline), read through the generic
  ``FeatureStore.get`` path a ``GeoStore`` takes (:class:`PlainStore`; the
  ``InMemoryFeatureStore`` fast path is timed too and quoted in the notes);
* ``geo@USE`` and ``geo@SGP``: the same job with its features read through a
  ``GeoStore`` from origin USE, then SGP (``NearestRouter``);
* ``geo@USE s=0``: the same through a second cluster with no WAN delays, which
  separates the transport's own cost from the WAN model's.

Each round trains 2 epochs per configuration and times the second (the first pays
numba compilation and connection warm-up); ``--rounds`` rounds (>= 5), median and
min-max spread. Losses must be identical across the three (same rows, same seeds).
Epoch time is the wall seconds of the whole epoch (training pass plus the layer-wise
evaluation, which reads every row once) as measured at the scaled WAN: the WAN's
share is the difference to ``memory``. Read latencies are
reported unscaled (divided by ``s``), p50/p95/p99 per origin, with the items each
region served.

    .venv/bin/python -m benchmarks.storage.geo.gnn_epoch [--rounds 5] [--time-scale 0.2]

Writes ``benchmarks/results/geo_gnn.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np
import torch

from strata.operators.io.datasets import load_dataset
from strata.operators.io.geo import GeoFit, fit_with_geo
from strata.operators.trainers import (
    ModelConfig,
    SampledTrainer,
    SamplingConfig,
    TrainConfig,
)
from strata.operators.trainers.data import FEATURES, TrainingData, as_training_data
from strata.operators.trainers.records import EpochRecord
from strata.storage.features import FeatureSchema, FeatureStore, Key
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.routing import NearestRouter
from strata.storage.geo.server import RegionCluster
from strata.storage.geo.store import GeoStoreSpec
from strata.storage.geo.topology import Topology, table1

RESULTS = Path(__file__).resolve().parents[2] / "results" / "geo_gnn.json"
COMMAND = ".venv/bin/python -m benchmarks.storage.geo.gnn_epoch"
ORIGINS = ("USE", "SGP")


class PlainStore(FeatureStore):
    """An in-memory store the trainer reads through ``get`` like any other store.

    ``InMemoryFeatureStore`` unlocks a first-layer fast path in ``BlockBatches``
    (aggregating straight from the table); a ``GeoStore`` cannot take it, so the
    fair in-memory baseline is the same rows behind the generic interface.
    """

    def __init__(self, inner: FeatureStore) -> None:
        self.inner = inner

    def _schema(self) -> dict[Key, FeatureSchema]:
        return self.inner.schema()

    def _get_all(self, key: Key) -> torch.Tensor:
        return self.inner.get(key)

    def _gather(self, key: Key, ids: np.ndarray, out: torch.Tensor) -> torch.Tensor:
        return self.inner.get(key, ids, out=out)

    def _put(self, key: Key, array: np.ndarray) -> None:
        self.inner.put(key, array)


def _trainer(epochs: int) -> SampledTrainer:
    config = TrainConfig(
        ModelConfig("sage", hidden=64), epochs=epochs, device="cpu", seed=0
    )
    # prefetch=0: each batch is gathered when the step needs it, so the WAN's cost
    # sits on the epoch's critical path instead of hiding behind the previous
    # epoch's evaluation (which the default prefetcher overlaps).
    sampling = SamplingConfig(fanouts=(10, 5), batch_size=64, prefetch=0)
    return SampledTrainer(config, sampling)


def _layout(
    data: TrainingData, topo: Topology, seed: int
) -> tuple[ItemSpace, Placement]:
    n = data.num_nodes
    rng = np.random.default_rng(seed)
    home = rng.integers(0, topo.num_regions, size=n).astype(np.int8)
    row_bytes = data.num_features * 4
    space = ItemSpace(n, 0, np.full(n, row_bytes, dtype=np.int32), home)
    placement = Placement.home_only(space)
    degree = np.diff(data.graph.indptr)
    hot = np.argsort(-degree, kind="stable")[: n // 10]
    for region in range(topo.num_regions):
        placement.add(region, hot)
    return space, placement


def _epoch_s(record: EpochRecord) -> float:
    return record.seconds  # training pass and layer-wise evaluation


def _spread(values: list[float]) -> list[float]:
    return [min(values), max(values)]


def run(rounds: int, time_scale: float, seed: int) -> dict[str, Any]:
    """Train every configuration ``rounds`` times, interleaved; collect figures."""
    torch.set_num_threads(2)
    numba.set_num_threads(2)
    topo = table1()
    data = as_training_data(
        load_dataset("planetoid:cora", normalize_features=True), "gnn_epoch"
    )
    space, placement = _layout(data, topo, seed)
    x = data.features.get(FEATURES).numpy()
    router = NearestRouter(placement, topo)
    plain = dataclasses.replace(data, features=PlainStore(data.features))
    times: dict[str, list[float]] = {}
    gathers: dict[str, list[float]] = {}  # the training batches' feature reads
    losses: dict[str, list[float]] = {}
    fits: dict[str, GeoFit] = {}
    with (
        RegionCluster.start(topo, placement, space, {FEATURES: x}, time_scale) as c,
        RegionCluster.start(topo, placement, space, {FEATURES: x}, 0.0) as flat,
    ):
        specs = {
            f"geo@{o}": GeoStoreSpec(c.info, topo.index(o), router) for o in ORIGINS
        }
        specs["geo@USE s=0"] = GeoStoreSpec(flat.info, 0, router)
        names = ["memory", "memory-fast", *specs]
        for name in names:
            times[name], gathers[name] = [], []
        for round_ in range(rounds):
            # Rotate the order each round, so no configuration always runs first.
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                records: list[EpochRecord] = []
                if name == "memory":
                    _trainer(2).fit(plain, records.append)
                elif name == "memory-fast":
                    _trainer(2).fit(data, records.append)
                else:
                    fit = fit_with_geo(_trainer(2), data, specs[name])
                    records, fits[name] = fit.epochs, fit
                times[name].append(_epoch_s(records[-1]))
                gathers[name].append(records[-1].gather_s)
                losses[name] = [r.loss for r in records]
    return {
        "gathers": gathers,
        "times": times,
        "losses": losses,
        "fits": fits,
        "topo": topo,
        "placement": placement,
    }


def rows(out: dict[str, Any], rounds: int, time_scale: float) -> list[dict[str, Any]]:
    """The results-table rows of one run."""
    times, losses, fits = out["times"], out["losses"], out["fits"]
    topo: Topology = out["topo"]
    identical = all(v == losses["memory"] for v in losses.values())
    med = {k: statistics.median(v) for k, v in times.items()}
    command = f"{COMMAND} --rounds {rounds} --time-scale {time_scale}"

    def detail(name: str) -> str:
        g = fits[name].geo
        served = ", ".join(
            f"{topo.regions[r]} {n}" for r, n in enumerate(g.items_by_region) if n
        )
        return (
            f"{name}: {g.reads.count} reads, read latency p50/p95/p99 "
            f"{g.reads.p50_ms:.0f}/{g.reads.p95_ms:.0f}/{g.reads.p99_ms:.0f} ms "
            f"(unscaled), {g.reads.mean_regions:.2f} regions/read, "
            f"{g.reads.mean_bytes / 1e6:.2f} MB/read; items served by {served}"
        )

    base = (
        f"Cora 2-layer SAGE, fan-outs 10,5, batch 64, Table I, s={time_scale}, "
        f"{rounds} interleaved rounds, second epoch timed (training + layer-wise "
        "evaluation, no prefetch); losses identical across every configuration: "
        f"{identical}; in-memory baseline read through the generic FeatureStore "
        "interface (InMemoryFeatureStore's first-layer fast path, which a GeoStore "
        f"cannot take: {med['memory-fast']:.3f} s)"
    )

    def row(
        work: str, name: str, peer: str, peer_name: str, note: str
    ) -> dict[str, Any]:
        return {
            "work": work,
            "metric": f"epoch s (scaled WAN, s={time_scale:g})",
            "better": "lower",
            "strata": round(med[name], 4),
            "strata_spread": [round(v, 4) for v in _spread(times[name])],
            "peer": peer,
            "peer_value": round(med[peer_name], 4),
            "peer_spread": [round(v, 4) for v in _spread(times[peer_name])],
            "ratio": round(med[name] / med[peer_name], 3),
            "target": "identical losses; WAN cost measured (no time target)",
            "met": identical,
            "command": command,
            "note": f"{base}. {note}",
        }

    memory = "in-memory store (same job, generic get path)"
    out_rows = [
        row(
            f"sampled SAGE epoch on Cora, features via GeoStore from {o}",
            f"geo@{o}",
            memory,
            "memory",
            detail(f"geo@{o}"),
        )
        for o in ORIGINS
    ]
    out_rows.append(
        row(
            "sampled SAGE epoch on Cora via GeoStore: origin SGP vs origin USE",
            "geo@SGP",
            "origin USE (same job)",
            "geo@USE",
            f"{detail('geo@USE')}. {detail('geo@SGP')}",
        )
    )
    out_rows.append(
        row(
            "sampled SAGE epoch on Cora via GeoStore from USE, no WAN model (s=0): "
            "the sockets, processes and Arrow frames alone",
            "geo@USE s=0",
            memory,
            "memory",
            detail("geo@USE s=0") + " (raw ms: s=0)",
        )
    )
    gathers = out["gathers"]
    gmed = {k: statistics.median(v) for k, v in gathers.items()}
    for o in ORIGINS:
        name = f"geo@{o}"
        out_rows.append(
            {
                "work": f"feature gathers of one sampled SAGE epoch on Cora (3 "
                f"training batches) via GeoStore from {o}",
                "metric": f"gather s per epoch (scaled WAN, s={time_scale:g})",
                "better": "lower",
                "strata": round(gmed[name], 4),
                "strata_spread": [round(v, 4) for v in _spread(gathers[name])],
                "peer": memory,
                "peer_value": round(gmed["memory"], 5),
                "peer_spread": [round(v, 5) for v in _spread(gathers["memory"])],
                "ratio": round(gmed[name] / max(gmed["memory"], 1e-9), 1),
                "target": "identical losses; WAN cost measured (no time target)",
                "met": identical,
                "command": command,
                "note": f"{base}. The WAN's direct share of the epoch: the "
                "training thread waiting on feature reads (less exposed to CPU "
                f"noise than the epoch time). {detail(name)}",
            }
        )
    return out_rows


def write_results(path: Path, result_rows: list[dict[str, Any]]) -> None:
    """Write the topic file atomically (temp file, then rename)."""
    doc = {
        "topic": "geo_gnn",
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}",
        "rows": result_rows,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


def main() -> None:
    """Run, print the rows, write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--time-scale", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    start = time.perf_counter()
    out = run(args.rounds, args.time_scale, args.seed)
    result_rows = rows(out, args.rounds, args.time_scale)
    for row in result_rows:
        print(json.dumps(row, indent=1))
    print(f"losses: {out['losses']}")
    print(f"wall {time.perf_counter() - start:.1f} s")
    write_results(args.out, result_rows)


if __name__ == "__main__":
    main()
