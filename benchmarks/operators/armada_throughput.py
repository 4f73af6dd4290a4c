"""Armada (1 sampler + 1 trainer) against one colocated worker: seeds/s on RMAT.

Issue 16's Armada acceptance: sampled GraphSAGE, fan-outs (10, 5), batch 1024,
RMAT scale 18 (262k nodes, 7.6M edges, F = 128; :mod:`gnn_dataset`), on this
2-core machine. Both runs use :class:`SampledGangTrainer` with the same global
batches and the same trainer loop (``...sampled.gang.train_rank``):

* ``colocated``: ``workers=1``: one process samples (prefetch thread) and trains;
* ``armada``: ``workers=1, samplers=1``: a sampler process streams the blocks to
  a trainer process over an engine channel; the two compete for the 2 cores.

Every fit runs in a fresh process (so each gets its own OpenMP wait policy and
fork server) and trains ``--epochs`` epochs; epochs 1.. are timed (epoch 0 of a
fresh process compiles and warms; its seconds are reported apart). Rounds
alternate the two (A B A B ...), once per OpenMP wait policy: the default
(spinning) and ``PASSIVE`` (what ``strata run`` sets). Both use 2 torch threads.
The rows carry both waits: the trainer's ``recv_wait_s`` (starved by the
sampler) and the sampler's ``send_blocked_s`` (held back by the trainer), and
where the time went.

Further rows (exact counts, no timing): the bytes of graph structure each
sampler holds with ``M = N = k`` samplers and trainers, on RMAT and on the SBM
of ``rapidgnn.md`` 4.1, for GREM, multilevel and random partitions, against a
full replica.

And the pipeline model of ``grem.md`` D1: 1, 2, 3 samplers feeding one trainer
whose step is a fixed sleep, the samplers adding a fixed delay per unit; the
trainer's measured batches/s against ``min(M / T_prep, N / T_compute)``, with
``T_prep`` the samplers' measured busy time per unit.

Writes ``benchmarks/results/armada.json`` (``--merge`` keeps the rows a partial
run does not redo). Run everything (about 12 minutes)::

    cd benchmarks/operators && ../../.venv/bin/python armada_throughput.py --rounds 5
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gnn_dataset import load_graph, write_rmat_dataset

from strata.engine.gang import GangContext, GangSpec, SharedTensors, run_gang_report
from strata.operators.samplers import SamplerConfig
from strata.operators.samplers.schedule import (
    balanced_train_ids,
    global_batches,
    rank_batches,
)
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.data import FEATURES, TrainingData
from strata.operators.trainers.sampled import (
    SampledGangConfig,
    SampledGangTrainer,
    SamplingConfig,
)
from strata.operators.trainers.sampled.armada import (
    ArmadaLayout,
    ArmadaPlan,
    ArmadaSource,
    armada_rank,
)
from strata.operators.trainers.sampled.structure import sampler_structure
from strata.partition import resolve
from strata.storage.features import InMemoryFeatureStore

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "armada.json"


def _data(data_dir: Path) -> TrainingData:
    graph = load_graph(data_dir)
    n = graph.num_nodes
    x = np.load(data_dir / "x.npy")
    y = torch.from_numpy(np.load(data_dir / "y.npy"))
    train_ids = np.load(data_dir / "train_ids.npy")
    masks = {
        name: torch.zeros(n, dtype=torch.bool) for name in ("train", "val", "test")
    }
    masks["train"][torch.from_numpy(train_ids)] = True
    rest = np.setdiff1d(np.arange(n), train_ids)[:2000]
    masks["val"][torch.from_numpy(rest[:1000])] = True
    masks["test"][torch.from_numpy(rest[1000:])] = True
    meta = json.loads((data_dir / "meta.json").read_text())
    return TrainingData(
        graph=graph,
        features=InMemoryFeatureStore({FEATURES: x}),
        y=y,
        masks=masks,
        num_classes=int(meta["num_classes"]),
        name=f"rmat{meta['scale']}",
    )


def _fit(data: TrainingData, mode: str, epochs: int, threads: int) -> dict[str, Any]:
    model = ModelConfig("sage", hidden=128, num_layers=2, dropout=0.0)
    config = TrainConfig(
        model,
        lr=0.003,
        epochs=epochs,
        patience=0,
        seed=0,
        device="cpu",
        threads=threads,
    )
    sampling = SamplingConfig(fanouts=(10, 5), batch_size=1024, prefetch=4)
    samplers = 1 if mode == "armada" else 0
    gang = SampledGangConfig(
        workers=1,
        samplers=samplers,
        cache_policy="none",
        device="cpu",
        threads_per_worker=threads,
        timeout_s=1200,
    )
    start = time.perf_counter()
    run = SampledGangTrainer(config, sampling, gang).fit(data)
    wall = time.perf_counter() - start
    report = run.report
    warm = report["per_trainer"][0]["epochs"][1:]  # epoch 0 compiles and warms

    def per_epoch(key: str) -> float:
        return statistics.mean(e.get(key, 0.0) for e in warm)

    seconds = [r.seconds for r in run.history[1:]]
    out = {
        "mode": mode,
        "wall_s": wall,
        "epoch_s": [r.seconds for r in run.history],
        "seeds": run.history[-1].seeds,
        "seeds_per_s": run.history[-1].seeds / statistics.mean(seconds),
        "cold_epoch_s": run.history[0].seconds,
        "compute_s": per_epoch("compute_s"),
        "gather_s": per_epoch("gather_s"),
        "sample_s": per_epoch("sample_s"),
        "trainer_stall_s": per_epoch("trainer_stall_s"),
        "recv_wait_s": per_epoch("recv_wait_s"),
        "final_loss": run.history[-1].loss,
    }
    if report.get("per_sampler"):
        sampler = report["per_sampler"][0]
        out.update(
            {
                "send_blocked_s_all_epochs": sampler["send_blocked_s"],
                "sampler_sample_s_all_epochs": sampler["sample_s"],
                "ship_bytes_all_epochs": sampler["ship_bytes"],
                "structure_bytes": sampler["structure_bytes"],
                "full_structure_bytes": sampler["full_structure_bytes"],
            }
        )
    return out


def _structure_graphs(
    args: argparse.Namespace, meta: dict[str, Any]
) -> list[tuple[str, Any, np.ndarray]]:
    """RMAT (the throughput graph) and the SBM of rapidgnn.md 4.1 (20% train)."""
    from strata.partition.metrics import as_undirected_simple
    from strata.storage.spec import load_graph as load_spec

    rmat = load_graph(args.data_dir)
    rmat_train = np.sort(np.load(args.data_dir / "train_ids.npy"))
    spec = "sbm:n=200000,blocks=64,degree=20,intra=0.7,seed=0,features=0"
    sbm = as_undirected_simple(load_spec(spec).graph)
    rng = np.random.default_rng(0)
    sbm_train = np.sort(rng.choice(sbm.num_nodes, sbm.num_nodes // 5, replace=False))
    return [
        (f"RMAT-{meta['scale']}, 64k train", rmat, rmat_train),
        ("SBM n=200k (64 blocks, degree 20, intra 0.7), 20% train", sbm, sbm_train),
    ]


def _structure_rows(args: argparse.Namespace, meta: dict[str, Any]) -> list[Any]:
    """Bytes of structure per sampler with M = N = k, per partitioner (exact)."""
    rows = []
    for name, graph, train_ids in _structure_graphs(args, meta):
        rows += _structure_rows_of(args, name, graph, train_ids)
    return rows


def _structure_rows_of(
    args: argparse.Namespace, name: str, graph: Any, train_ids: np.ndarray
) -> list[Any]:
    steps = -(-train_ids.size // 1024)
    rows = []
    for k in args.structure_k:
        found: dict[str, dict[str, Any]] = {}
        for method in ("grem", "multilevel", "random"):
            start = time.perf_counter()
            partitioner, _ = resolve(method, k=k, seed=0)
            owner = np.asarray(partitioner.partition(graph).assignment, np.int32)
            partition_s = time.perf_counter() - start
            split = balanced_train_ids(owner, train_ids, k)
            layout = ArmadaLayout(k, k)
            sizes = []
            for s in range(k):
                served = layout.trainers_of(s, steps)
                seeds = train_ids[np.isin(split.rank_of[train_ids], served)]
                part = sampler_structure(graph, seeds, num_layers=2)
                sizes.append(part.structure_bytes)
                full = part.full_structure_bytes
            found[method] = {
                "max_bytes": max(sizes),
                "bytes": sizes,
                "full_bytes": full,
                "partition_s": partition_s,
                "rehomed_train": split.rehomed,
            }
            print(
                json.dumps({"graph": name, "k": k, "method": method, **found[method]})
            )
        grem, full = found["grem"], found["grem"]["full_bytes"]
        others = "; ".join(
            f"{m}: max {v['max_bytes'] / full:.3f} of a replica "
            f"(per sampler {[round(b / full, 3) for b in v['bytes']]}, partition "
            f"{v['partition_s']:.1f} s)"
            for m, v in found.items()
        )
        rows.append(
            {
                "work": (
                    f"graph structure held per Armada sampler, {k} samplers + {k} "
                    f"trainers, fan-outs (10, 5), {name}, GREM partition"
                ),
                "metric": "bytes of in-adjacency on the largest sampler",
                "better": "lower",
                "strata": grem["max_bytes"],
                "strata_spread": [min(grem["bytes"]), max(grem["bytes"])],
                "peer": "full replica on every sampler",
                "peer_value": full,
                "peer_spread": [full, full],
                "ratio": grem["max_bytes"] / full,
                "target": "< 1 (report; no figure given)",
                "met": grem["max_bytes"] < full,
                "command": (
                    "cd benchmarks/operators && ../../.venv/bin/python "
                    f"armada_throughput.py --rounds 0 --pipeline-rounds 0 "
                    f"--structure-k {k} --merge"
                ),
                "note": (
                    "Exact counts: a sampler keeps the in-edges of the 1-hop "
                    "in-closure of the seeds of the trainer it serves (M = N: "
                    "sampler s serves trainer s), plus an int64 indptr over all "
                    f"{graph.num_nodes} ids. {others}."
                ),
            }
        )
    return rows


@dataclass(frozen=True)
class _Shared:
    """The arrays a sampler reads, in shared memory."""

    shared: SharedTensors
    num_nodes: int

    def array(self, name: str) -> np.ndarray:
        return self.shared[name].numpy()

    def graph(self) -> Any:
        from strata.storage import CSRGraph

        return CSRGraph(
            indptr=self.array("graph.indptr"),
            indices=self.array("graph.indices"),
            num_nodes=self.num_nodes,
        )


def _sleepy_trainer(
    plan: ArmadaPlan,
    data: _Shared,
    compute_s: float,
    ctx: GangContext,
    source: ArmadaSource,
    group: Any,
) -> dict[str, Any]:
    """A trainer whose step is a fixed sleep; times epochs 1.. (epoch 0 warms)."""
    train_ids, rank_of = data.array("train_ids"), data.array("rank_of")
    start = 0.0
    batches = 0
    for epoch in range(plan.epochs):
        if epoch == 1:
            source.counters()  # restart the waits' count: epochs 1.. only
            start = time.perf_counter()
        steps = global_batches(train_ids, plan.seed, epoch, plan.batch_size)
        for item in source.epoch(epoch, rank_batches(steps, rank_of, source.trainer)):
            if item.blocks is not None:
                time.sleep(compute_s)
                batches += epoch >= 1
    seconds = time.perf_counter() - start
    return {
        "batches_per_s": batches / seconds,
        "recv_wait_s": source.counters()["recv_wait_s"],
    }


def _pipeline_worker(
    ctx: GangContext, plan: ArmadaPlan, data: _Shared, compute_s: float
) -> Any:
    train = functools.partial(_sleepy_trainer, plan, data, compute_s)
    return armada_rank(ctx, plan, data, train)


def _pipeline_rows(args: argparse.Namespace, meta: dict[str, Any]) -> list[Any]:
    """grem.md D1: measured batches/s against min(M / T_prep, N / T_compute)."""
    graph = load_graph(args.data_dir)
    train_ids = np.sort(np.load(args.data_dir / "train_ids.npy"))
    rank_of = np.full(graph.num_nodes, -1, dtype=np.int32)
    rank_of[train_ids] = 0
    arrays = {
        "graph.indptr": graph.indptr,
        "graph.indices": graph.indices,
        "train_ids": train_ids,
        "rank_of": rank_of,
    }
    compute_s, delay_s = args.pipeline_compute_s, args.pipeline_prep_s
    found: dict[int, list[dict[str, Any]]] = {m: [] for m in args.pipeline_samplers}
    with SharedTensors.from_arrays(
        {k: torch.from_numpy(np.array(v)) for k, v in arrays.items()}
    ) as shared:
        data = _Shared(shared, graph.num_nodes)
        for r in range(args.pipeline_rounds):
            for m in args.pipeline_samplers:
                plan = ArmadaPlan(
                    layout=ArmadaLayout(m, 1),
                    epochs=3,
                    batch_size=1024,
                    seed=0,
                    sampler=SamplerConfig(fanouts=(10, 5)),
                    prep_delay_s=delay_s,
                )
                spec = GangSpec(
                    workers=m + 1, device="cpu", timeout_s=600, threads_per_worker=1
                )
                report = run_gang_report(_pipeline_worker, spec, plan, data, compute_s)
                samplers, trainer = report.results[:m], report.results[m]
                # Per-unit preparation time: the samplers' busy time per unit.
                busy = sum(x["loop_s"] - x["send_blocked_s"] for x in samplers)
                units = sum(x["batches"] for x in samplers)
                t_prep = busy / units
                predicted = min(m / t_prep, 1 / compute_s)
                result = {
                    "round": r,
                    "samplers": m,
                    "measured": trainer["batches_per_s"],
                    "predicted": predicted,
                    "t_prep_s": t_prep,
                    "recv_wait_s": trainer["recv_wait_s"],
                    "send_blocked_s": sum(x["send_blocked_s"] for x in samplers),
                }
                found[m].append(result)
                print(json.dumps({"pipeline": True, **result}), flush=True)
    rows = []
    for m, results in found.items():
        ratios = [x["measured"] / x["predicted"] for x in results]
        measured, m_spread = _spread([x["measured"] for x in results])
        predicted, p_spread = _spread([x["predicted"] for x in results])
        rows.append(
            {
                "work": (
                    f"Armada pipeline model (grem.md D1): {m} sampler(s) + 1 trainer "
                    f"whose step sleeps {compute_s * 1e3:.0f} ms, samplers sample "
                    f"RMAT-{meta['scale']} batches of 1024 (10, 5) and wait "
                    f"{delay_s * 1e3:.0f} ms more per unit"
                ),
                "metric": "trainer batches/s",
                "better": "higher",
                "strata": measured,
                "strata_spread": m_spread,
                "peer": "prediction min(M / T_prep, N / T_compute)",
                "peer_value": predicted,
                "peer_spread": p_spread,
                "ratio": measured / predicted,
                "target": "within 0.8 .. 1.2 of the prediction",
                "met": all(0.8 <= x <= 1.2 for x in ratios),
                "command": (
                    "cd benchmarks/operators && ../../.venv/bin/python "
                    "armada_throughput.py --rounds 0 --structure-k --pipeline-rounds "
                    f"{args.pipeline_rounds} --merge"
                ),
                "note": (
                    f"{args.pipeline_rounds} rounds; per-round measured/predicted "
                    f"{[round(x, 3) for x in ratios]}; T_prep (sampler busy time per "
                    "unit, measured: loop seconds minus send_blocked_s) "
                    f"{[round(x['t_prep_s'] * 1e3, 1) for x in results]} ms; trainer "
                    f"recv_wait_s {[round(x['recv_wait_s'], 2) for x in results]}, "
                    "samplers' send_blocked_s "
                    f"{[round(x['send_blocked_s'], 2) for x in results]} (3 epochs, "
                    "epochs 1-2 timed). Sleeps stand in for compute and preparation "
                    "so the model is checked, not this machine's 2 cores "
                    "(grem.md pitfall 8)."
                ),
            }
        )
    return rows


def _spread(values: list[float]) -> tuple[float, list[float]]:
    return statistics.median(values), [min(values), max(values)]


def _one(args: argparse.Namespace, mode: str, policy: str) -> dict[str, Any]:
    """One fit in a fresh process (its own OpenMP policy, its own fork server)."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    command = [
        sys.executable,
        __file__,
        "--one",
        mode,
        "--epochs",
        str(args.epochs),
        "--threads",
        str(args.threads),
        "--data-dir",
        str(args.data_dir),
    ]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=1200, check=False
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{mode} ({policy}) failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


POLICIES = {
    "default": "OpenMP's default wait policy (spinning)",
    "passive": "OMP_WAIT_POLICY=PASSIVE (what `strata run` sets)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--one", choices=["colocated", "armada"], default=None)
    parser.add_argument("--structure-k", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--pipeline-rounds", type=int, default=3)
    parser.add_argument(
        "--merge", action="store_true", help="keep --out's rows this run does not redo"
    )
    parser.add_argument("--pipeline-samplers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--pipeline-compute-s", type=float, default=0.010)
    parser.add_argument("--pipeline-prep-s", type=float, default=0.020)
    args = parser.parse_args()
    args.data_dir = args.data_dir or Path(f"/tmp/strata-bench/rmat{args.scale}")
    if args.one:  # a child: one fit, one JSON line
        torch.set_num_threads(args.threads)
        print(
            json.dumps(_fit(_data(args.data_dir), args.one, args.epochs, args.threads))
        )
        return
    if not (args.data_dir / "meta.json").exists():
        write_rmat_dataset(args.data_dir, args.scale)
    meta = json.loads((args.data_dir / "meta.json").read_text())
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        p: {"colocated": [], "armada": []} for p in args.policies
    }
    load_before = os.getloadavg()[0]
    for r in range(args.rounds):
        for policy in args.policies:
            modes = ("colocated", "armada") if r % 2 == 0 else ("armada", "colocated")
            for mode in modes:
                result = _one(args, mode, policy)
                runs[policy][mode].append(result)
                print(json.dumps({"round": r, "policy": policy, **result}), flush=True)
    load_after = os.getloadavg()[0]
    rows = [
        _row(args, meta, policy, runs[policy], (load_before, load_after))
        for policy in args.policies
        if args.rounds
    ]
    if args.structure_k:
        rows += _structure_rows(args, meta)
    if args.pipeline_rounds:
        rows += _pipeline_rows(args, meta)
    document: dict[str, Any] = {"topic": "armada", "rows": rows, "runs": runs}
    if args.merge and args.out.exists():
        # Keep the rows (and throughput runs) this run did not redo.
        old = json.loads(args.out.read_text())
        works = {row["work"] for row in rows}
        kept = [row for row in old["rows"] if row["work"] not in works]
        document["rows"] = kept + rows
        if not args.rounds:
            document["runs"] = old.get("runs", {})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(rows, indent=2))


def _row(
    args: argparse.Namespace,
    meta: dict[str, Any],
    policy: str,
    runs: dict[str, list[dict[str, Any]]],
    load: tuple[float, float],
) -> dict[str, Any]:
    armada, colocated = runs["armada"], runs["colocated"]
    a_med, a_spread = _spread([x["seeds_per_s"] for x in armada])
    c_med, c_spread = _spread([x["seeds_per_s"] for x in colocated])

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(x[key] for x in rows)

    epochs = args.epochs
    structure = med(armada, "structure_bytes") / 2**20
    full = med(armada, "full_structure_bytes") / 2**20
    note = (
        f"{POLICIES[policy]}. {args.rounds} interleaved rounds, every fit in a fresh "
        f"process, {epochs} epochs per fit, epochs 1.. timed (epoch 0 apart: armada "
        f"{med(armada, 'cold_epoch_s'):.2f} s, colocated "
        f"{med(colocated, 'cold_epoch_s'):.2f} s); load average {load[0]:.1f} "
        f"before, {load[1]:.1f} after (2 shared cores). Waits per timed epoch "
        f"(medians): armada trainer recv_wait_s {med(armada, 'recv_wait_s'):.2f} "
        f"(starved by the sampler), sampler send_blocked_s "
        f"{med(armada, 'send_blocked_s_all_epochs') / epochs:.2f} per epoch over all "
        f"epochs (held back by the trainer); colocated trainer_stall_s "
        f"{med(colocated, 'trainer_stall_s'):.2f}. Where a timed epoch went (medians, "
        f"s): armada trainer compute {med(armada, 'compute_s'):.2f}, gather "
        f"{med(armada, 'gather_s'):.2f}, sampler sampling "
        f"{med(armada, 'sampler_sample_s_all_epochs') / epochs:.2f}; colocated "
        f"compute {med(colocated, 'compute_s'):.2f}, gather "
        f"{med(colocated, 'gather_s'):.2f}, sample {med(colocated, 'sample_s'):.2f}. "
        f"Shipped {med(armada, 'ship_bytes_all_epochs') / epochs / 2**20:.0f} MiB of "
        f"blocks per epoch; the sampler held {structure:.1f} of {full:.1f} MiB of "
        "structure (one sampler serves the one trainer: every seed's closure)."
    )
    command = (
        "cd benchmarks/operators && ../../.venv/bin/python armada_throughput.py "
        f"--rounds {args.rounds} --epochs {epochs} --threads {args.threads} "
        f"--policies {' '.join(args.policies)} --structure-k --pipeline-rounds 0"
    )
    return {
        "work": (
            f"sampled GraphSAGE [10, 5], batch 1024, RMAT-{meta['scale']} "
            f"({meta['num_nodes'] // 1000}k nodes, {meta['num_edges'] / 1e6:.1f}M "
            "edges, F=128): 1 sampler + 1 trainer process (Armada) vs 1 colocated "
            f"worker; {policy} OpenMP wait policy"
        ),
        "metric": "training seeds/s",
        "better": "higher",
        "strata": a_med,
        "strata_spread": a_spread,
        "peer": "Strata colocated gang worker (same trainer loop, same batches)",
        "peer_value": c_med,
        "peer_spread": c_spread,
        "ratio": a_med / c_med,
        "target": ">= 1.3",
        "met": a_med / c_med >= 1.3,
        "command": command,
        "note": note,
    }


if __name__ == "__main__":
    main()
