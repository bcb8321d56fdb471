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
from .reader import MixtureReader


def mixture_state(
    mix: Any, *, loaded: dict[str, Any] | None, chain: tuple[Any, int, Any] | None, restored: Any
) -> dict[str, Any]:
    """``mix.state_dict()`` (see its docstring for the schema): ``loaded``, a state loaded and not yet
    read; ``chain``, the running (chain, epoch, place), None before one; ``restored``, its place's deal
    after an elastic restore."""
    identity = mix.identity()
    if loaded is not None:
        pending = {k: v for k, v in loaded.items() if k != "elastic"}
        if "elastic" in loaded:  # loaded, not yet iterated: a checkpoint now must not lose it
            pending["elastic"] = {n: p.to_state() for n, p in loaded["elastic"].items()}
        return {**copy.deepcopy(pending), **identity}
    if chain is None:
        return {
            "epoch": mix.epoch,
            "place": None,
            "node": None,
            "sources": sources_at(mix, mix.epoch),
            **identity,
        }
    running, epoch, place = chain
    node = running.get_state()
    if restored is not None:
        budgets, plans, sources = restored
        deal = {"budgets": list(budgets), "spans": [[list(s) for s in p.spans] for p in plans]}
        return {
            "epoch": epoch,
            "place": list(place),
            "node": node,
            "left": plan_left(node, sum(budgets)),
            "sources": copy.deepcopy(sources),
            "plan": deal,
            **identity,
        }
    length = mix.plan(place[1], place[3]).worker_length(place[2])
    return {
        "epoch": epoch,
        "place": list(place),
        "node": node,
        "left": plan_left(node, length),
        "sources": sources_at(mix, epoch, place[3]),
        **identity,
    }


def plan_left(node: Mapping[str, Any], length: int) -> int:
    """Samples of the plan a worker has not yet reached (stand-ins owed not counted)."""
    reader = saved_state_of(MixtureReader, node)
    return length - sum(reader["counts"]) if reader and reader["counts"] else length


def sources_at(mix: Any, epoch: int, workers: int = 1) -> dict[str, list[int]]:
    """``{name: [start, per_epoch]}``: where each source's pass stream stands at ``epoch``'s start and
    how far that epoch moves it."""
    plan = mix.shape.epoch_plan(mix.placement.resolve()[1], workers, epoch)
    starts, moves = mix.starts(epoch, plan), plan.per_epoch()
    return {n: [s, e] for n, s, e in zip(mix.names, starts, moves, strict=True)}
