"""Run ``strata run JOB`` in this process and split its time by cause; JSON out.

Usage: ``python run_cli_probe.py LAUNCH_TIME JOB [--set k=v ...]``, where
``LAUNCH_TIME`` is the parent's ``time.time()`` just before it started this
process (so interpreter start-up counts). Prints one JSON line with, each as
``[wall s, cpu s]`` since launch or as durations:

* ``first_step``: when the job's first step (its dataset load) starts;
* ``dataset``: how long that step ran;
* ``dynamo``: what the first ``torch.optim.Adam`` cost (it imports
  ``torch._dynamo``);
* ``end``: when the command returned;
* ``numba``: the wall and CPU seconds of numba's compilations (cold cache
  only: a kernel loaded from its cache is not compiled), with each kernel's;
* ``work_s``: the seconds the job's epochs reported (training and evaluation).

Used by ``test_cli_startup.py``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

LAUNCH = float(sys.argv[1])


def _now() -> list[float]:
    return [time.time() - LAUNCH, time.process_time()]


marks: dict[str, Any] = {}
compiles: list[tuple[str, float, float]] = []


def _install_numba_timer() -> None:
    from numba.core import event

    depth = [0]

    class Top(event.Listener):  # nested compiles are inside their caller's time
        def on_start(self, e: Any) -> None:
            depth[0] += 1
            if depth[0] == 1:
                e.data["_t"] = (time.perf_counter(), time.process_time())

        def on_end(self, e: Any) -> None:
            if depth[0] == 1:
                fn = e.data["dispatcher"].py_func
                wall, cpu = e.data["_t"]
                compiles.append(
                    (
                        f"{fn.__module__}.{fn.__qualname__}",
                        time.perf_counter() - wall,
                        time.process_time() - cpu,
                    )
                )
            depth[0] -= 1

    event.register("numba:compile", Top())


def _wrap_first_step() -> None:
    import strata.operators.io.datasets as datasets

    load = datasets.load_dataset

    def timed(*args: Any, **kwargs: Any) -> Any:
        marks.setdefault("first_step", _now())
        start = _now()
        try:
            return load(*args, **kwargs)
        finally:
            marks["dataset"] = [b - a for a, b in zip(start, _now(), strict=True)]

    datasets.load_dataset = timed  # type: ignore[assignment]


def _wrap_adam() -> None:
    import torch

    init = torch.optim.Adam.__init__

    def timed(self: Any, *args: Any, **kwargs: Any) -> None:
        cold = "torch._dynamo" not in sys.modules
        start = _now()
        init(self, *args, **kwargs)
        if cold:
            marks["dynamo"] = [b - a for a, b in zip(start, _now(), strict=True)]

    torch.optim.Adam.__init__ = timed  # type: ignore[method-assign]


def main() -> None:
    job, settings = sys.argv[2], sys.argv[3:]
    from strata.engine.cli import passive_openmp_threads

    passive_openmp_threads()  # what `strata run` does first, before torch starts
    # The imports the job makes anyway (its modules import torch and numba); done
    # first so the timers can be installed, and counted in first_step all the same.
    _install_numba_timer()
    _wrap_first_step()
    _wrap_adam()
    from strata.operators.cli.main import main as strata_main

    report = f"/tmp/strata-probe-{LAUNCH:.0f}.json"
    code = strata_main(["run", job, "--quiet", "--report", report, *settings])
    marks["end"] = _now()
    with open(report) as f:
        data = json.load(f)
    counters = data["steps"]["train"]["counters"]
    work = float(counters.get("train_s", 0.0)) + float(counters.get("eval_s", 0.0))
    print(
        json.dumps(
            {
                "exit": code,
                **marks,
                "numba": [sum(c[1] for c in compiles), sum(c[2] for c in compiles)],
                "kernels": sorted(compiles, key=lambda c: -c[2]),
                "work_s": work,
            }
        )
    )


if __name__ == "__main__":
    main()
