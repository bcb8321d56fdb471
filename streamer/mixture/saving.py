"""A mixture's state as plain data, as ``Mixture.state_dict`` hands it out (its schema is documented there).

Read-only over the mixture: what is pending from a load comes back as loaded, a mixture not yet iterated
names where its sources stand, and a running chain adds its place, its nodes' state and what its plan
has left. Trade-off: ``left`` is recounted from the reader's counts at every save (a sum over sources),
not kept in step with every sample.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..chain.node import saved_state_of
from .carry import carry_state
from .reader import MixtureReader


def mixture_state(
    mix: Any, *, loaded: dict[str, Any] | None, chain: tuple[Any, int, Any] | None, restored: Any
) -> dict[str, Any]:
    """``mix.state_dict()`` (see its docstring for the schema): ``loaded``, a state loaded and not yet
    read; ``chain``, the running (chain, epoch, place), None before one; ``restored``, its place's deal
    after an elastic restore."""
    identity = {**mix.identity(), "weights": mix.shape.weights_state()}
    if loaded is not None:
        pending = {k: v for k, v in loaded.items() if k != "elastic"}
        if "elastic" in loaded:  # loaded, not yet iterated: a checkpoint now must not lose it
            pending["elastic"] = {n: p.to_state() for n, p in loaded["elastic"].items()}
        return {**copy.deepcopy(pending), **identity}
    if chain is None:
        return {"epoch": mix.epoch, "place": None, "node": None, **sources_at(mix, mix.epoch), **identity}
    running, epoch, place = chain
    node = running.get_state()
    if restored is not None:
        spans = [[list(s) for s in p.spans] for p in restored.plans]
        deal = {"budgets": list(restored.budgets), "spans": spans, "by": restored.by}
        carry = {name: [list(s) for s in spans] for name, spans in (restored.carry or {}).items()}
        return {
            "epoch": epoch,
            "place": list(place),
            "node": node,
            "left": plan_left(node, sum(restored.budgets)),
            "sources": copy.deepcopy(restored.sources),
            "carry": carry,
            "plan": deal,
            **({"rest": copy.deepcopy(restored.rest)} if restored.rest is not None else {}),
            **identity,
        }
    length = mix.plan(place[1], place[3]).worker_length(place[2])
    return {
        "epoch": epoch,
        "place": list(place),
        "node": node,
        "left": plan_left(node, length),
        **sources_at(mix, epoch, place[3]),
        **identity,
    }


def plan_left(node: Mapping[str, Any], length: int) -> int:
    """Samples of the plan a worker has not yet reached (stand-ins owed not counted)."""
    reader = saved_state_of(MixtureReader, node)
    return length - sum(reader["counts"]) if reader and reader["counts"] else length


def sources_at(mix: Any, epoch: int, workers: int = 1) -> dict[str, Any]:
    """``{"sources": {name: [start, per_epoch]}, "carry": {name: spans}}``: where each source's stream
    stands at ``epoch``'s start and how far that epoch moves it."""
    plan = mix.shape.epoch_plan(mix.placement.resolve()[1], workers, epoch)
    at, moves = mix.positions(epoch, plan), plan.per_epoch()
    sources = {n: [p.start, e] for n, p, e in zip(mix.names, at, moves, strict=True)}
    return {"sources": sources, "carry": carry_state(dict(zip(mix.names, at, strict=True)))}
