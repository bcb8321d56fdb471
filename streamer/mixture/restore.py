"""Restoring a Mixture from every old rank's state, on any ranks x workers: checked, then each source's rest.

As for one dataset (``restore.py``): the list of every old rank's states (Mixture states or
StatefulDataLoader states holding them), gathered once, continues the epoch on any (world, workers), each
source's samples still once; ``mixelastic`` finds and deals what is left. A Mixture's state names where each
source's pass stream stood ("sources") and, through its reader's per-source counts and the window order,
what each worker handed out; nothing else is needed. The identity a state must share with the mixture adds
the sources' shares, the epoch size and the buffer size (it sets the windows) to the data, seed, shuffle
and remainder: a changed mixture is refused here, as it is mid-epoch on one topology.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..chain.node import saved_state_of
from ..elastic.deal import Plan, Span, join
from ..elastic.restore import by_place_of, check_identity, one_epoch, rank_states, topology
from .carry import Position, carry_state, positions_of
from .elastic import PlanStream, unread
from .passes import PassStream
from .reader import MixtureReader
from .shape import MixtureShape

Origins = dict[str, tuple[int, Position]]  # source name -> (epoch, where its stream stands then)


def elastic_pending(
    shape: MixtureShape, states: Sequence[Any], *, per_batch: int | None = None, changed: bool = False
) -> tuple[dict[str, Any] | None, Origins]:
    """``{"epoch", "sources", "elastic": {name: Plan}}`` (None once every rank had finished its epoch), and
    where each source's pass stream stands for the epochs after: where the saved epoch ends. ``shape``:
    the mixture the states were saved under; ``per_batch``: the batch size a schedule counts steps in (the
    pending then says the checkpoint's ``step``); ``changed``: the states were saved under other weights
    (the pending says ``by_weights``: its leftover is dealt as a change's rest, ``rest.py``)."""
    ranks = [rank_states(state, i) for i, state in enumerate(states)]
    if not ranks:
        raise ValueError("the list of states is empty: pass every old rank's state, in rank order")
    workers = [w for _, rank_workers in ranks for w in rank_workers]
    if not workers:
        raise ValueError("the states hold no Mixture state (were they saved before the first batch?)")
    identity = shape.identity()
    for w in workers:
        if "sources" not in w:
            raise ValueError("not a Mixture state: it has no 'sources' (was it saved by a ShardDataset?)")
        check_identity(w, identity)
    epoch = one_epoch(workers)
    sources = _sources(workers, shape.names)
    streams_at = positions_of(workers[0], shape.names)
    # The epochs after this one go on from where its runs end, on any topology.
    after = {name: (epoch + 1, streams_at[name].advance(moved)) for name, (_, moved) in sources.items()}
    if all(finished for finished, _ in ranks):
        return None, after  # the epoch is over on every rank; each source goes on from its end
    pending = [w["elastic"] for w in workers if "elastic" in w]
    if pending:  # saved after an elastic load, before reading: what was left is still left
        if len(pending) != len(workers) or any(p != pending[0] for p in pending):
            raise ValueError("the states mix a pending elastic restore with others: gather them at one step")
        lefts = {name: Plan.from_state(p) for name, p in pending[0].items()}
        step, by_weights = workers[0].get("step"), bool(workers[0].get("by_weights"))
        return _pending(epoch, sources, streams_at, lefts, step, by_weights), after
    placed = [w for w in workers if w.get("place")]
    if not placed:  # no worker had begun the epoch: it begins afresh on the new topology
        at_start = {name: (epoch, streams_at[name]) for name in sources}
        unplaced = {"epoch": epoch, "place": None, "node": None, "sources": _listed(sources)}
        return {**unplaced, "carry": carry_state(streams_at)}, at_start
    world, k = topology(placed, len(states))
    left: dict[str, list[Span]] = {name: [] for name in shape.names}
    by_place = by_place_of(placed)
    restored = any(w.get("plan") for w in placed)
    streams = [shape.pass_stream(j) for j in range(len(shape.names))]
    for rank in range(world):
        for worker in range(k):
            state = by_place.get((rank, worker))
            if state is None and restored:
                raise ValueError(f"no state for rank {rank} worker {worker}: pass every rank's state")
            try:
                place = (rank, world, worker, k)
                for name, spans in worker_left(shape, streams, state, sources, place, epoch):
                    left[name] += spans
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise ValueError(f"the state of rank {rank} worker {worker} is damaged: {exc!r}") from exc
    lefts = {name: Plan((), join(spans)) for name, spans in left.items()}
    step = _steps_done(per_batch, by_place, k) if per_batch is not None else None
    return _pending(epoch, sources, streams_at, lefts, step, changed), after


def _steps_done(per_batch: int, by_place: Mapping[tuple[int, int], Mapping[str, Any]], workers: int) -> int:
    """The epoch's global step at the checkpoint (a scheduled mixture's rest follows its schedule from
    there): rank 0's batches handed out, each of its workers' whole and last part batches, plus the step a
    change's rest began at."""
    done = 0
    for worker in range(workers):
        state = by_place.get((0, worker))
        node = saved_state_of(MixtureReader, state.get("node")) if state else None
        done += -(-sum(int(c) for c in node["counts"]) // per_batch) if node else 0
    rest = next((s.get("rest") for s in by_place.values() if s.get("rest")), None)
    return done + (int(rest["step"]) if rest else 0)


def _sources(workers: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Each source's (start, moved) in the saved epoch: the same in every worker's state (carry too)."""
    found = {
        (tuple((str(n), int(v[0]), int(v[1])) for n, v in w["sources"].items()), repr(w.get("carry") or {}))
        for w in workers
    }
    if len(found) != 1:
        raise ValueError("the states disagree on where the sources stood: gather them at one step")
    sources = {name: (start, moved) for name, start, moved in found.pop()[0]}
    if sorted(sources) != sorted(names):
        raise ValueError(f"the states were saved from sources {sorted(sources)}, not {sorted(names)}")
    return sources


def _listed(sources: Mapping[str, tuple[int, int]]) -> dict[str, list[int]]:
    return {name: [start, moved] for name, (start, moved) in sources.items()}


def _pending(
    epoch: int,
    sources: Mapping[str, tuple[int, int]],
    at: Mapping[str, Position],
    lefts: dict[str, Plan],
    step: int | None,
    by_weights: bool,
) -> dict[str, Any]:
    # "place" and "node" as any unplaced state has them: saved before the workers start, it loads again.
    unplaced = {"epoch": epoch, "place": None, "node": None, "sources": _listed(sources)}
    scheduled = {"step": step} if step is not None else {}
    changed = {"by_weights": True} if by_weights else {}
    return {**unplaced, "carry": carry_state(at), "elastic": lefts, **scheduled, **changed}


def worker_left(
    shape: MixtureShape,
    streams: Sequence[PassStream],
    state: Mapping[str, Any] | None,
    sources: Mapping[str, tuple[int, int]],
    place: tuple[int, int, int, int],
    epoch: int,
) -> list[tuple[str, list[Span]]]:
    """What one old worker (``place``, in ``epoch``) had not handed out of each source, in pass-stream
    positions: its run, or its deal's spans, past what its reader's counts say it handed out."""
    rank, world, worker, workers = place
    node = saved_state_of(MixtureReader, state.get("node")) if state else None
    restored = state.get("plan") if state else None
    if restored:
        budgets = [int(b) for b in restored["budgets"]]
    else:
        budgets = list(shape.epoch_plan(world, workers, epoch).budgets(worker))
    counts = [int(c) for c in node["counts"]] if node else [0] * len(budgets)
    if len(counts) != len(shape.names) or len(budgets) != len(counts):
        raise ValueError(f"{len(counts)} counts and {len(budgets)} budgets for {len(shape.names)} sources")
    length = sum(budgets)
    out = []
    for j, name in enumerate(shape.names):
        stream: PassStream | PlanStream = streams[j]
        if restored:
            stream = PlanStream(stream, Plan.from_state({"ids": [], "spans": restored["spans"][j]}).spans)
            run = (0, stream.size)
        else:
            begin, end = shape.epoch_plan(world, workers, epoch).worker_range(j, rank, worker)
            run = (sources[name][0] + begin, sources[name][0] + end)
        if not 0 <= counts[j] <= run[1] - run[0]:
            raise ValueError(f"source {name!r}: {counts[j]} handed out of a run of {run[1] - run[0]}")
        out.append((name, unread(stream, run, shape.window(budgets[j], length), counts[j])))
    return out
