"""The outputs of a training run on a gang: accuracies, plan and per-worker counters.

:func:`dist_outputs` (a batch step) takes the distributed trainer's ports
(``result``, ``epochs``, ``report``) and adds, per worker and per epoch, the
headline sums of its traffic counters (:data:`HEADLINE`: bytes host->device,
device->host and device<->device, halo rows, all-reduce bytes), the one-off
setup traffic, and the per-worker peaks: ``tensor_peak_bytes`` (HongTu: the
device arena's high-water mark; exact and Emma modes: resident tensors plus
what autograd saved for backward) and peak RSS.
"""

from __future__ import annotations

from typing import Any

from strata.operators.trainers.records import training_outputs

__all__ = ["HEADLINE", "dist_outputs", "headline", "setup_counters"]


#: Counters summed into each worker's per-epoch headline figures.
HEADLINE = {
    "h2d_bytes": ("h2d_bytes", "grad_h2d_bytes", "cache_h2d_bytes", "topo_h2d_bytes"),
    "d2h_bytes": ("d2h_bytes", "cache_d2h_bytes"),
    "d2d_bytes": ("peer_send_bytes", "halo_send_bytes"),
    "halo_rows": ("halo_send_rows", "peer_send_rows"),
    "allreduce_bytes": ("allreduce_bytes",),
}


def headline(epoch: dict[str, int]) -> dict[str, int]:
    """One worker's epoch counters (``"<phase>.<name>"``) as the headline sums.

    The training and evaluation phases count (forward, backward, evaluation);
    the one-off ``setup`` phase (features to the device, topology), which the
    trainer books into the first epoch, does not: :func:`setup_counters` has it.
    ``d2d_bytes`` and ``halo_rows`` count what the worker *sent* to peers (halo
    exchange in exact and Emma mode, peer copies in HongTu), so the gang's sum
    counts each transfer once.

    Examples:
        >>> headline({"fwd.halo_send_rows": 3, "bwd.halo_send_rows": 3,
        ...           "setup.halo_send_rows": 9, "fwd.h2d_bytes": 8})["halo_rows"]
        6
    """
    return _sums({k: v for k, v in epoch.items() if not k.startswith("setup.")})


def setup_counters(epochs: list[dict[str, int]]) -> dict[str, int]:
    """The one-off ``setup`` phase's headline sums (see :func:`headline`)."""
    first = epochs[0] if epochs else {}
    return _sums({k: v for k, v in first.items() if k.startswith("setup.")})


def _sums(counters: dict[str, int]) -> dict[str, int]:
    return {
        key: sum(v for k, v in counters.items() if k.split(".", 1)[1] in names)
        for key, names in HEADLINE.items()
    }


def dist_outputs(
    results: list[dict[str, Any]],
    epochs: list[dict[str, Any]],
    reports: list[dict[str, Any]],
    facts: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Batch step: accuracies, the plan and the per-worker per-epoch counters."""
    extra = {**(extra or {}), **facts}
    outputs = training_outputs(results, epochs, extra)
    (report,) = reports
    if "emma" in report:
        from strata.operators.trainers.distributed.emma import emma_outputs

        outputs = emma_outputs(results, epochs, reports, extra)
    workers = report["per_worker"]
    outputs["partition"] = report["partition"]
    if "plan" in report:
        plan = report["plan"]
        outputs["plan"] = {k: v for k, v in plan.items() if k != "candidates"}
        outputs["plan"]["candidates"] = plan["candidates"]
    outputs["counters"] = [
        {
            "rank": w["rank"],
            "epochs": [headline(e) for e in w["epochs"]],
            "setup": setup_counters(w["epochs"]),
            "peak_rss_bytes": w["peak_rss_bytes"],
            "tensor_peak_bytes": _tensor_peak(w),
            **(
                {"arena_peak_bytes": w["arena_peak_bytes"]}
                if "arena_peak_bytes" in w
                else {}
            ),
        }
        for w in workers
    ]
    per_epoch = [
        {key: sum(w["epochs"][i][key] for w in outputs["counters"]) for key in HEADLINE}
        for i in range(len(workers[0]["epochs"]))
    ]
    outputs["counters_per_epoch"] = per_epoch
    outputs["peak_rss_bytes"] = max(w["peak_rss_bytes"] for w in workers)
    tensor_peaks = [c["tensor_peak_bytes"] for c in outputs["counters"]]
    if all(p is not None for p in tensor_peaks):
        outputs["tensor_peak_bytes"] = max(tensor_peaks)
    peaks = [w["arena_peak_bytes"] for w in workers if "arena_peak_bytes" in w]
    if peaks:
        outputs["arena_peak_bytes"] = max(peaks)
    outputs["gang_startup_s"] = report["startup_s"]
    return outputs


def _tensor_peak(worker: dict[str, Any]) -> int | None:
    """Peak per-worker tensor bytes: HongTu's arena, else the exact engine's meter.

    HongTu accounts every tensor it brings to the device in its arena (modelled
    bounds for torch's temporaries included); the exact and Emma engines measure
    their resident tensors plus what autograd saved for backward
    (:class:`~strata.operators.trainers.distributed.partition_parallel.SavedTensorMeter`).
    None where neither was measured.
    """
    if "arena_peak_bytes" in worker:
        return int(worker["arena_peak_bytes"])
    peak = worker.get("tensor_peak_bytes")
    return None if peak is None else int(peak)
