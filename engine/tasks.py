"""Expand a plan into tasks: one per step, or one per shard of a keyed step.

Executors run tasks; the topology between tasks is the same on every executor, which
is what makes results match: the same producer shards feed the same consumer shards,
and keyed items are split by the same stable hash.

Examples:
    >>> from strata.engine.ops import Map
    >>> from strata.engine.pipeline import Pipeline
    >>> from strata.engine.testing import ListSource
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource([1, 2]))
    >>> _ = p.step("text", Map(str), "numbers", shards=2, key=int)
    >>> [t.name for t in expand(p.validate())]
    ['numbers', 'text[0/2]', 'text[1/2]']
    >>> expand(p.validate())[1].inbound_links
    1
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from strata.engine.pipeline import Key, Step, StepKind
from strata.engine.plan import Plan


@dataclass(frozen=True, slots=True)
class Route:
    """Where one output port's items go: input ``input`` of step ``consumer``.

    Items are split by ``key`` across the consumer's ``shards`` (a whole item goes
    to shard 0 when the consumer is not sharded).
    """

    consumer: str
    input: int
    shards: int
    key: Key | None


@dataclass(frozen=True, slots=True)
class InputLink:
    """One of a task's inputs: which step feeds it, over how many producer shards."""

    producer: str
    shards: int
    streaming: bool


@dataclass(frozen=True, slots=True)
class Task:
    """A unit an executor runs: one step, or one shard of a keyed step."""

    step: Step
    shard: int
    shards: int
    inputs: tuple[InputLink, ...]
    routes: tuple[tuple[Route, ...], ...]  # by output port, in ``step.ports`` order
    collect: tuple[str, ...]  # ports whose items the driver collects
    seed: int

    @property
    def name(self) -> str:
        """``step``, or ``step[shard/shards]`` for a keyed step's shard."""
        return task_name(self.step.id, self.shard, self.shards)

    @property
    def inbound_links(self) -> int:
        """How many producer tasks feed this task (each ends with one end-of-stream)."""
        return sum(link.shards for link in self.inputs)


def expand(
    plan: Plan, *, collect: tuple[str, ...] = (), seed: int = 0
) -> tuple[Task, ...]:
    """Return the plan's tasks, in plan order.

    Args:
        plan: A validated plan.
        collect: ``"step"`` or ``"step.port"`` references whose items the driver
            gathers (the recorded steps are always gathered).
        seed: The run's seed, from which each task's seed is derived.
    """
    gathered = {_collect_ref(plan, ref) for ref in collect}
    gathered |= {(step_id, plan.step(step_id).ports[0]) for step_id in plan.recorded}
    tasks = []
    for step in plan.steps:
        inputs = tuple(
            InputLink(
                e.producer,
                plan.step(e.producer).shards,
                _streams(plan.step(e.producer)),
            )
            for e in plan.inputs_of(step.id)
        )
        routes = tuple(
            tuple(
                Route(
                    e.consumer,
                    e.input,
                    plan.step(e.consumer).shards,
                    plan.step(e.consumer).key,
                )
                for e in plan.outputs_of(step.id, port)
            )
            for port in step.ports
        )
        ports = tuple(port for port in step.ports if (step.id, port) in gathered)
        for shard in range(step.shards):
            tasks.append(
                Task(
                    step,
                    shard,
                    step.shards,
                    inputs,
                    routes,
                    ports,
                    task_seed(seed, step.id, shard),
                )
            )
    return tuple(tasks)


def task_name(step_id: str, shard: int, shards: int) -> str:
    """The name of one task: ``step``, or ``step[shard/shards]``."""
    return step_id if shards == 1 else f"{step_id}[{shard}/{shards}]"


def task_seed(seed: int, step_id: str, shard: int) -> int:
    """A 63-bit seed for one task, stable across runs, processes and executors."""
    digest = hashlib.blake2b(
        f"{seed}/{step_id}/{shard}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little") >> 1


def _streams(step: Step) -> bool:
    return step.kind is not StepKind.BATCH


def _collect_ref(plan: Plan, ref: str) -> tuple[str, str]:
    step_id, _, port = ref.partition(".")
    step = plan.step(step_id)
    return step_id, port or step.ports[0]
