"""The rest of an epoch under changed weights, and any epoch whose sources carry: each place's deal.

A mixture changed mid-epoch (weights or schedules; the same sources, data, epoch size and buffer) takes
the change at the next step on every rank alike, with no communication: on one topology worker i of
every rank has handed out the same counts, and the state names the weights its plan was made under, so
every rank finds every old worker's unread part of each source (``restore.worker_left``). Each worker
then reads what it had left (the same lengths: the same steps), its budgets from the new weights (or
the new schedule from the step the change is taken at). Source j's rest is its unread positions in
stream order, then its stream on when the new weights want more; what they want less of is carried
into the next epoch and read there first (``carry.py``). Both are dealt as spans in place order,
rank after rank, worker within rank, as the plan deals an epoch's run. Trade-off: the change needs the
loader's whole state (every worker's counts), and a carried epoch is read as a restore's deal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..elastic.deal import Plan, Span, join
from ..elastic.restore import check_identity, one_epoch, rank_states
from ..placement.segments import rank_quota, worker_slice
from .carry import Position, carry_state, positions_of
from .restore import Origins, worker_left
from .schedule import Pieces, pieces
from .scheduled import ScheduledPlan, WorkerSteps, worker_batches
from .shape import MixtureShape

PENDING = ("epoch", "place", "node", "carry", "rest")  # a change's pending rest: what it keeps
BY = ("elastic", "carry", "rest", "budget")  # who dealt a restored place: a state saves it as plan["by"]


class Restored(NamedTuple):
    """One place's deal: per-source ``budgets`` and ``plans`` (spans of each pass stream), ``sources``
    (``{name: [start, moved]}``) and ``carry`` (``{name: spans}``): the epoch's streams, which it moves by
    ``moved``; ``rest`` (``{"lengths", "step", "world"}`` after a mid-epoch change), ``shares`` (a
    schedule's running shares for this worker) and ``by`` (one of ``BY``)."""

    budgets: list[int]
    plans: list[Plan]
    sources: dict[str, list[int]]
    carry: dict[str, tuple[Span, ...]] | None = None
    rest: dict[str, Any] | None = None
    shares: Pieces | None = None
    by: str = "elastic"


def rest_budgets(
    shape: MixtureShape, epoch: int, rest: Mapping[str, Any], world: int, workers: int
) -> tuple[list[list[int]], list[Pieces | None]]:
    """Per worker index: its budgets for the rest of ``lengths`` samples from global step ``step`` of the
    epoch, and (scheduled) its running shares; the same on every rank."""
    lengths = [int(n) for n in rest["lengths"]]
    if len(lengths) != workers or any(n < 0 for n in lengths):
        raise ValueError(f"the state's rest has lengths {lengths!r:.80}; one per worker ({workers}), >= 0")
    key = ("rest", epoch, tuple(lengths), int(rest["step"]), world, workers)  # every place asks the same
    return shape.kept(key, lambda: _rest_budgets(shape, epoch, lengths, int(rest["step"]), world))


def _rest_budgets(
    shape: MixtureShape, epoch: int, lengths: list[int], step: int, world: int
) -> tuple[list[list[int]], list[Pieces | None]]:
    workers = len(lengths)
    if shape.schedules is None:
        return [shape.rest_budgets(n) for n in lengths], [None] * workers
    per_batch = shape.per_batch or 1
    base = shape.plan(world, workers)
    steps = sum(worker_batches([base.worker_length(w) for w in range(workers)], per_batch))  # the epoch's
    batches = worker_batches(lengths, per_batch)
    first = epoch * steps + step
    schedules = shape.schedules
    shares: list[Pieces | None] = [
        pieces(schedules, length=n, per_batch=per_batch, first_step=first, steps=WorkerSteps(batches, w))
        if n
        else None
        for w, n in enumerate(lengths)
    ]
    none = [0] * len(shape.names)
    return [s.budgets() if s is not None else none for s in shares], shares


def _per_rank(table: Sequence[Sequence[int]]) -> list[int]:
    """Each source's samples one rank reads: its budgets summed over the worker indices."""
    return [sum(column) for column in zip(*table, strict=True)]


def place_deal(
    shape: MixtureShape,
    epoch: int,
    streams: Mapping[str, Position],
    place: tuple[int, int, int, int],
    rest: Mapping[str, Any] | None = None,
) -> Restored:
    """``place``'s deal of an epoch whose sources stand at ``streams`` (carrying): the plan's budgets and
    ranges; or, with ``rest``, of the rest of an epoch after a change: ``rest_budgets``, in place order."""
    rank, world, worker, workers = place
    if rest is None:
        plan = shape.epoch_plan(world, workers, epoch)
        budgets = list(plan.budgets(worker))
        ranges = [plan.worker_range(j, rank, worker) for j in range(len(budgets))]
        shares = plan.shares[worker] if isinstance(plan, ScheduledPlan) else None
        moved = plan.per_epoch()
    else:
        table, all_shares = rest_budgets(shape, epoch, rest, world, workers)
        budgets, shares = table[worker], all_shares[worker]
        per_rank = _per_rank(table)
        before = [sum(row[j] for row in table[:worker]) for j in range(len(budgets))]
        ranges = [(rank * n + b, rank * n + b + m) for n, b, m in zip(per_rank, before, budgets, strict=True)]
        moved = [world * n for n in per_rank]
    positions = [streams[name] for name in shape.names]
    plans = [Plan((), p.spans(begin, end)) for p, (begin, end) in zip(positions, ranges, strict=True)]
    return Restored(
        budgets,
        plans,
        {n: [p.start, m] for n, p, m in zip(shape.names, positions, moved, strict=True)},
        carry={n: p.carry for n, p in zip(shape.names, positions, strict=True) if p.carry},
        rest=dict(rest) if rest is not None else None,
        shares=shares,
        by="carry" if rest is None else "rest",
    )


def changed_pending(new: MixtureShape, states: Sequence[Mapping[str, Any]], *, whole: bool) -> dict[str, Any]:
    """The pending state that continues this rank's ``states`` (saved mid-epoch by the same mixture under
    other weights) under ``new``'s from the next step; ``whole``: they are a loader's, so a worker without
    one had not begun. ValueError naming what cannot change mid-epoch."""
    saved = states[0]
    old = _old_shape(new, states)
    placed = [s for s in states if s.get("place")]
    if not placed:  # a change's rest, saved before it began: the same rest, under these weights
        return _moved(new, {k: v for k, v in saved.items() if k in PENDING}, saved["rest"])
    epoch = one_epoch(placed)
    _, world, _, workers = (int(v) for v in placed[0]["place"])
    by_worker = {int(s["place"][2]): s for s in placed}
    if len(by_worker) < workers and not whole:
        raise ValueError(
            f"this state is one DataLoader worker's of {workers}: a mixture changed mid-epoch needs every "
            "worker's counts; load the loader's state (loader.state_dict()) into the mixture"
        )
    if len(by_worker) < workers and saved.get("plan"):
        raise ValueError(f"no state for {workers - len(by_worker)} of {workers} workers: pass the loader's")
    lengths, done = [], 0  # each worker's samples still to read; the steps its batches so far took
    for worker in range(workers):
        state = by_worker.get(worker)
        dealt = _dealt(old, epoch, state, (0, world, worker, workers))
        if dealt is not None:
            length = sum(dealt.budgets)
        else:
            length = old.epoch_plan(world, workers, epoch).worker_length(worker)
        remaining = int(state.get("left", length)) if state else length
        lengths.append(remaining)
        done += -(-(length - remaining) // (new.per_batch or 1))
    sources = {str(n): (int(v[0]), int(v[1])) for n, v in saved["sources"].items()}
    left = _unread(old, epoch, by_worker, sources, world)
    at = positions_of(saved, old.names)
    step = int(saved["rest"]["step"]) if saved.get("rest") else 0
    carried = {n: at[n].advance(sources[n][1]).then(join(sorted(left[n]))) for n in old.names}
    sources_now = {n: [p.start, 0] for n, p in carried.items()}
    pending = {
        "epoch": epoch,
        "place": None,
        "node": None,
        "sources": sources_now,
        "carry": carry_state(carried),
    }
    return _moved(new, pending, {"lengths": lengths, "step": step + done, "world": world})


def saved_shape(new: MixtureShape, states: Sequence[Any]) -> MixtureShape:
    """The mixture every old rank's gathered ``states`` were saved under: ``new``, or ``new`` under the
    weights they name when those differ (weights changed with an elastic restore)."""
    for i, state in enumerate(states):
        for saved in rank_states(state, i)[1]:
            weights = saved.get("weights")
            if isinstance(weights, Mapping) and "elastic" not in saved and weights != new.weights_state():
                return _old_shape(new, [saved])
            return new
    return new


def _old_shape(new: MixtureShape, states: Sequence[Mapping[str, Any]]) -> MixtureShape:
    """The shape ``states`` were saved under: ``new`` with the weights they name, checked against them."""
    weights = states[0].get("weights")
    if not isinstance(weights, Mapping):
        raise ValueError(
            "the state does not name the weights it was saved under (an older shardstream saved it); "
            "change a mixture at an epoch boundary"
        )
    if new.budgeted or weights.get("budgeted"):
        raise ValueError("a Mixture with batch_tokens changes at an epoch boundary only, not in the middle")
    old = new.with_weights(weights)
    try:
        for state in states:
            check_identity(state, old.identity())
    except ValueError:
        raise ValueError(
            "the state was saved from another mixture than this one under other weights: in the middle "
            "of an epoch only weights and schedules may change (the sources, their data, epoch_size, "
            "buffer_size and seed stay); change the rest at an epoch boundary"
        ) from None
    return old


def _moved(new: MixtureShape, pending: dict[str, Any], rest: Mapping[str, Any]) -> dict[str, Any]:
    """``pending`` with its ``rest`` and each source's ``moved``: what the rest reads of it, all ranks."""
    world, workers = int(rest["world"]), len(rest["lengths"])
    table, _ = rest_budgets(new, int(pending["epoch"]), rest, world, workers)
    moved = [world * n for n in _per_rank(table)]
    sources = {n: [int(pending["sources"][n][0]), m] for n, m in zip(new.names, moved, strict=True)}
    return {**pending, "sources": sources, "rest": dict(rest)}


def _unread(
    old: MixtureShape,
    epoch: int,
    by_worker: Mapping[int, Mapping[str, Any]],
    sources: Mapping[str, tuple[int, int]],
    world: int,
) -> dict[str, list[Span]]:
    """Every source's unread spans over all ranks: worker i of each rank stands where this rank's does."""
    workers = int(next(iter(by_worker.values()))["place"][3])
    streams = [old.pass_stream(j) for j in range(len(old.names))]
    left: dict[str, list[Span]] = {name: [] for name in old.names}
    for rank in range(world):
        for worker in range(workers):
            place = (rank, world, worker, workers)
            state = by_worker.get(worker)
            as_rank = _as_place(old, epoch, state, place) if state else None
            for name, spans in worker_left(old, streams, as_rank, sources, place, epoch):
                left[name] += spans
    return left


def by_weights(shape: MixtureShape, pending: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``pending`` if it is an elastic restore's leftover to deal by weights (a schedule's, or weights
    other than those it was saved under: ``scheduled_deal``), else None."""
    if pending and "elastic" in pending and (shape.schedules is not None or pending.get("by_weights")):
        return dict(pending)
    return None


def scheduled_deal(
    shape: MixtureShape, pending: Mapping[str, Any], place: tuple[int, int, int, int]
) -> Restored:
    """A scheduled mixture's elastic restore: every old rank's leftover read as the rest of the epoch after
    a change, its budgets from the schedule from the checkpoint's step on; each rank its
    equal quota of the leftover, each source its unread part first, what the schedule wants less of
    carried into the next epoch."""
    streams, rest = _scheduled_rest(shape, pending, place[1], place[3])
    return place_deal(shape, int(pending["epoch"]), streams, place, rest)


def scheduled_after(shape: MixtureShape, pending: Mapping[str, Any], world: int, workers: int) -> Origins:
    """Where every source stands after a scheduled elastic restore's epoch read on ``world`` x
    ``workers``: what the schedule read of its stream moved it, the rest of its leftover carried."""
    streams, rest = _scheduled_rest(shape, pending, world, workers)
    table, _ = rest_budgets(shape, int(pending["epoch"]), rest, world, workers)
    moved = [world * n for n in _per_rank(table)]
    epoch = int(pending["epoch"]) + 1
    return {name: (epoch, streams[name].advance(m)) for name, m in zip(shape.names, moved, strict=True)}


def _scheduled_rest(
    shape: MixtureShape, pending: Mapping[str, Any], world: int, workers: int
) -> tuple[dict[str, Position], dict[str, Any]]:
    """Each source's stream for the rest (its leftover, then on from where its epoch run ended) and the
    rest's lengths, step and world."""
    lefts = {name: _as_plan(pending["elastic"][name]) for name in shape.names}
    quota = rank_quota(sum(len(left) for left in lefts.values()), world, shape.placement.remainder)
    lengths = [worker_slice(quota, w, workers)[1] for w in range(workers)]
    rest = {"lengths": lengths, "step": int(pending.get("step") or 0), "world": world}
    at = positions_of(pending, shape.names)
    moved = {name: int(value[1]) for name, value in pending["sources"].items()}
    return {name: at[name].advance(moved[name]).then(lefts[name].spans) for name in shape.names}, rest


def _as_plan(value: Plan | Mapping[str, Any]) -> Plan:
    return value if isinstance(value, Plan) else Plan.from_state(value)  # type: ignore[arg-type]


def _dealt(
    shape: MixtureShape, epoch: int, state: Mapping[str, Any] | None, place: tuple[int, int, int, int]
) -> Restored | None:
    """The deal ``state``'s epoch was read under at ``place`` (None: the plan's own runs); ValueError for
    an elastic restore's, which only its own rank knows."""
    plan = state.get("plan") if state else None
    if not plan:
        return None
    by = plan.get("by", "elastic") if isinstance(plan, Mapping) else "elastic"
    if by not in ("carry", "rest"):
        raise ValueError(
            f"the state was saved in an epoch dealt by {by!r} (an elastic restore's, or a budget's), which "
            "the other ranks' deals cannot be found from; change the mixture at an epoch boundary"
        )
    return place_deal(shape, epoch, positions_of(state, shape.names), place, state.get("rest"))


def _as_place(
    shape: MixtureShape, epoch: int, state: Mapping[str, Any], place: tuple[int, int, int, int]
) -> dict[str, Any]:
    """``state`` as worker ``place[2]`` of rank ``place[0]`` would have saved it at the same step: the same
    counts; its deal, if it had one, that rank's."""
    out = {**state, "place": list(place)}
    dealt = _dealt(shape, epoch, state, place)
    if dealt is not None:
        out["plan"] = {"budgets": dealt.budgets, "spans": [[list(s) for s in p.spans] for p in dealt.plans]}
    return out
