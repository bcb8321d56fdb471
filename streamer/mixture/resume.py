"""Restoring a Mixture: the same mixture continues exactly; a changed one carries every source on.

A state names, for every source, where its stream stood at the epoch's start (``"sources"``' start and
any ``"carry"``, ``carry.py``) and how far the epoch moves it. Loaded into the same mixture (same
sources, same budgets), the saved chain continues as if never stopped. Loaded into a changed one at an
epoch boundary (weights changed, sources added or removed), every remaining source's stream goes on
from where the saved run left it — no sample of a pass repeated or skipped — and new sources start at
their first pass. In the middle of an epoch, weights and schedules may change (``rest.py``): the rest
of the epoch follows the new ones from the next step, from this rank's own state (every worker's, so a
loader's), with each source's unread part read first and what the new weights leave of it carried.
A state saved in a dealt epoch (an elastic restore's, a carried one's, a change's rest) carries its
place's deal ("plan") and continues it on the same place; after that epoch every source goes on from
where the saved epoch ends.

A StatefulDataLoader's own state is taken too. That matters at an epoch's end: the loader then starts the
next epoch without handing its workers any state, so a changed mixture learns where its sources stand
only from ``mixture.load_state_dict(loader_state)``, called before the loader starts its workers. A loader
that snapshots less often than every step (``snapshot_every_n_steps > 1``) replays the steps since its
last snapshot through its workers when given the state; a changed mixture cannot replay the old one, so
its workers refuse with the fix: hand that state to the mixture only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch.utils.data import get_worker_info

from ..chain.node import is_int
from ..datasets.base import Place, check_place
from ..datasets.saved import saved_fields
from ..elastic.deal import Plan
from ..elastic.restore import check_identity, check_identity_keys, loader_dataset_states, rank_states
from .carry import carry_of, positions_of
from .elastic import deal_sources
from .rest import Restored, by_weights, changed_pending, place_deal, scheduled_deal
from .restore import Origins
from .shape import MixtureShape

FINISHED = "finished"


@dataclass(frozen=True, kw_only=True)
class Loaded:
    """What a loaded state sets: the state to start the next chain from (None: none), where each source's
    pass stream stands, and the epoch a DataLoader's state says is over (None: not known to be)."""

    pending: dict[str, Any] | None
    origins: Origins
    ended_epoch: int | None


def restore_point(
    shape: MixtureShape, state: Mapping[str, Any], *, world: int, ended_epoch: int | None
) -> Loaded:
    """Check a loaded state; what it sets. Raise ValueError if unusable. ``world``: this run's world size;
    ``ended_epoch``: what an earlier load found over (a worker's copy of the mixture carries it)."""
    if "_snapshot" in state or "dataset_state" in state:  # a StatefulDataLoader's
        _, workers = loader_dataset_states(state) or (0, {})
        finished = bool(state.get("_iterator_finished"))
        states = [saved_mixture(shape, s) for s in workers.values() if s]
        if not states:
            raise ValueError("the loader state holds no dataset state (was it saved before the first batch?)")
        # The loader hands each worker its own state; the parent keeps none. Workers get the mixture
        # pickled: they learn that their (maybe older) snapshots' epoch is over.
        ended = int(states[0]["epoch"]) if finished else None
        origins, over = _origins(shape, states[0], world=world, ended=finished, ended_epoch=ended)
        if over is None:  # changed mid-epoch: the rest under the new weights, from every worker's counts
            rank_states(state, 0)  # refuses snapshots older than the loader's last step
            return _changed(shape, states, whole=True)
        return Loaded(pending=None, origins=_no_carry_with_budgets(shape, origins), ended_epoch=ended)
    state = saved_mixture(shape, state)
    origins, over = _origins(shape, state, world=world, ended=False, ended_epoch=ended_epoch)
    if over is None:
        return _changed(shape, [state], whole=False)
    pending = {**state, "node": FINISHED} if over else dict(state)
    return Loaded(pending=pending, origins=_no_carry_with_budgets(shape, origins), ended_epoch=ended_epoch)


def _no_carry_with_budgets(shape: MixtureShape, origins: Origins) -> Origins:
    """``origins``; ValueError if a budgeted mixture would have to read a carry (its deal is by cost)."""
    if shape.budgeted and any(at.carry for _, at in origins.values()):
        raise ValueError(
            "the state carries unread samples of a source into the next epoch (a mixture changed in "
            "the middle of an epoch); a Mixture with batch_tokens cannot read a carry: finish that "
            "epoch without batch_tokens first"
        )
    return origins


def _changed(shape: MixtureShape, states: list[dict[str, Any]], *, whole: bool) -> Loaded:
    """A state saved mid-epoch under other weights: the rest of its epoch under this mixture's."""
    pending = changed_pending(shape, states, whole=whole)
    epoch = int(pending["epoch"])
    return Loaded(pending=pending, origins=_after(pending, shape, epoch), ended_epoch=None)


def _after(state: Mapping[str, Any], shape: MixtureShape, epoch: int) -> Origins:
    """Where every source stands once ``state``'s epoch (or rest) has moved it by its ``moved``."""
    at = positions_of(state, list(state["sources"]))
    return {name: (epoch + 1, at[name].advance(int(v[1]))) for name, v in state["sources"].items()}


def saved_mixture(shape: MixtureShape, state: Any) -> dict[str, Any]:
    """``state`` as a dict whose keys have the types and ranges a Mixture saves, with every identity key;
    ValueError naming the key. What the chain's nodes hold is theirs to check (see ``Mixture``'s load)."""
    state = saved_fields(state, "Mixture")
    if "sources" not in state:
        raise ValueError("not a Mixture state: it has no 'sources' (was it saved by a ShardDataset?)")
    check_identity_keys(state)
    sources = state["sources"]
    if not isinstance(sources, Mapping) or not all(
        isinstance(v, (list, tuple)) and len(v) == 2 and all(is_int(x) and x >= 0 for x in v)
        for v in sources.values()
    ):
        raise ValueError(
            f"the state has sources={sources!r:.80}; it must map names to [start, moved], ints >= 0"
        )
    left = state.get("left")
    if left is not None and not (is_int(left) and left >= 0):
        raise ValueError(f"the state has left={left!r:.60}; it must be an int >= 0")
    if state.get("plan"):
        _plan_of(state["plan"], shape)
    carry_of(state, list(sources))
    rest = state.get("rest")
    if rest is not None and not (
        isinstance(rest, Mapping)
        and is_int(rest.get("step"))
        and rest["step"] >= 0
        and is_int(rest.get("world"))
        and rest["world"] >= 1
        and isinstance(rest.get("lengths"), (list, tuple))
        and all(is_int(n) and n >= 0 for n in rest["lengths"])
    ):
        raise ValueError(f"the state has rest={rest!r:.80}; it must be {{'lengths', 'step', 'world'}}, ints")
    place = state.get("place")
    if rest is not None and place and (rest["world"] != place[1] or len(rest["lengths"]) != place[3]):
        raise ValueError(
            f"the state's rest={rest!r:.80} is not of its place's world and workers {place!r:.40}"
        )
    if state.get("elastic"):
        elastic = state["elastic"]
        if not isinstance(elastic, Mapping) or sorted(elastic) != sorted(shape.names):
            raise ValueError(
                f"the state has elastic={elastic!r:.80}; it must map every source to its leftover"
            )
        for name, value in elastic.items():
            _plan({"ids": [], "spans": []} if value is None else value, f"elastic[{name!r}]")
    return state


def _plan_of(value: Any, shape: MixtureShape) -> tuple[list[int], list[Plan]]:
    """A restored place's deal, ``{"budgets", "spans"}``: one budget and one list of spans per source."""
    n = len(shape.names)
    budgets = value.get("budgets") if isinstance(value, Mapping) else None
    spans = value.get("spans") if isinstance(value, Mapping) else None
    if not (
        isinstance(budgets, (list, tuple))
        and isinstance(spans, (list, tuple))
        and len(budgets) == len(spans) == n
        and all(is_int(b) and b >= 0 for b in budgets)
    ):
        raise ValueError(f"the state has plan={value!r:.80}; it must hold {n} budgets and {n} lists of spans")
    return [int(b) for b in budgets], [_plan({"ids": [], "spans": s}, "plan spans") for s in spans]


def _origins(
    shape: MixtureShape, state: Mapping[str, Any], *, world: int, ended: bool, ended_epoch: int | None
) -> tuple[Origins, bool | None]:
    """Where each source's stream stands, and whether the state's epoch is over by its own chain (None:
    it is not, and the mixture's weights changed: ``rest.py`` continues it).

    ``ended``: the state's epoch is over, whatever its chain says (a loader's snapshots can be older)."""
    saved = state.get("sources")
    if not isinstance(saved, Mapping) or "epoch" not in state:
        raise ValueError("not a Mixture state: it has no 'sources' (was it saved by a ShardDataset?)")
    epoch = int(state["epoch"])
    identity = _same_streams(state, shape)
    starts = {str(name): (int(value[0]), int(value[1])) for name, value in saved.items()}
    after = _after(state, shape, epoch)
    dealt = bool(state.get("plan") or state.get("rest"))
    if state.get("elastic") or (dealt and _same_weights(shape, state)):  # a dealt epoch: its own runs
        check_identity(state, identity)  # its deal is of this mixture's streams, as the restore checked
        if sorted(starts) != sorted(shape.names):
            raise ValueError(f"the state was saved from sources {sorted(starts)}, not {sorted(shape.names)}")
        return after, False
    place = state.get("place")
    info = get_worker_info()
    world = int(place[1]) if place else world
    workers = int(place[3]) if place else (info.num_workers if info is not None else 1)
    per_epoch = dict(zip(shape.names, shape.epoch_plan(world, workers, epoch).per_epoch(), strict=True))
    at = positions_of(state, list(starts))
    at_start = {name: (epoch, at[name]) for name in starts}
    if "weights" in state:
        same = _same_weights(shape, state)
    else:  # saved before states named their weights: the same amounts, the same mixture
        same = {name: moved for name, (_, moved) in starts.items()} == per_epoch
    if same and not dealt:
        if state.get("node") and state.get("left") != 0:  # the saved chain goes on: the same mixture only
            check_identity(state, identity)
        return at_start, False
    node, left = state.get("node"), state.get("left")
    if ended or (node and left == 0):  # the saved epoch is over: every source goes on from its end
        return after, not ended
    if ended_epoch == epoch:
        raise ValueError(
            f"a DataLoader worker was handed a snapshot from before the end of epoch {epoch} (the loader "
            "state was saved with snapshot_every_n_steps > 1) to replay the steps since, which the changed "
            "mixture cannot do; load the state into the mixture only (mixture.load_state_dict(state)), not "
            "into the loader: the epoch is over, and the mixture carries every source on from there"
        )
    if not node and not state.get("rest"):  # the epoch had not begun: it begins under the new mixture
        return at_start, False
    if sorted(starts) == sorted(shape.names):
        return after, None  # the rest of the epoch under the new weights (the state must name its own)
    raise ValueError(
        f"the mixture changed (saved sources {sorted(starts)} with per-epoch amounts "
        f"{ {n: m for n, (_, m) in starts.items()} }, now {per_epoch}) but the state was saved in the "
        f"middle of epoch {epoch}; change its sources at an epoch boundary (a state saved after an "
        "epoch's last sample, or before its first); in the middle only weights and schedules may change"
    )


def _same_streams(state: Mapping[str, Any], shape: MixtureShape) -> dict[str, Any]:
    """``shape``'s identity; ValueError if ``state`` was saved with another seed or shuffle: a changed
    mixture may load a state, but not one whose pass streams are other ones."""
    identity = shape.identity()
    for key in ("seed", "shuffle"):
        if key in state and state[key] != identity[key]:
            raise ValueError(
                f"the state was saved with {key}={state[key]!r}, not {identity[key]!r}; every "
                "source's pass stream depends on it"
            )
    return identity


def _same_weights(shape: MixtureShape, state: Mapping[str, Any]) -> bool:
    """Whether ``state`` was saved under this mixture's weights (a state without them: assumed so)."""
    return state.get("weights", shape.weights_state()) == shape.weights_state()


def resume_point(
    shape: MixtureShape, pending: dict[str, Any] | None, place: Place, epoch: int
) -> tuple[int, dict[str, Any] | str | None, Restored | None]:
    """The epoch to read (``epoch`` without a pending state), the chain state to start from (``FINISHED``:
    nothing left of that epoch) and, after an elastic restore, this place's deal."""
    if not pending:
        return epoch, None, None
    epoch, node = int(pending["epoch"]), pending.get("node")
    carry = carry_of(pending, shape.names)
    if by_weights(shape, pending):  # the leftover under a schedule, or under other weights
        return epoch, None, scheduled_deal(shape, pending, place)
    if "elastic" in pending:  # every old rank's leftover: this place's deal of it
        lefts = [_plan(pending["elastic"][name]) for name in shape.names]
        rank, world, worker, workers = place
        remainder = shape.placement.remainder
        budgets, plans = deal_sources(
            lefts, rank=rank, world=world, worker=worker, workers=workers, remainder=remainder
        )
        return epoch, None, Restored(budgets, plans, dict(pending["sources"]), carry=carry)
    restored = None
    by = pending["plan"].get("by", "elastic") if pending.get("plan") else None
    if pending.get("rest") and not pending.get("plan"):  # a change's rest, not yet begun: this place's deal
        restored = place_deal(shape, epoch, positions_of(pending, shape.names), place, pending["rest"])
    elif by in ("carry", "rest"):  # dealt from where the sources stood: dealt again, shares and all
        saved = tuple(int(v) for v in pending["place"])
        restored = place_deal(shape, epoch, positions_of(pending, shape.names), saved, pending.get("rest"))
    elif pending.get("plan"):  # this place's own state from a restored epoch
        budgets, plans = _plan_of(pending["plan"], shape)
        restored = Restored(budgets, plans, dict(pending["sources"]), carry=carry, by=by or "elastic")
    if node is None or node == FINISHED:
        return epoch, node, restored
    check_place(pending["place"], place)
    return epoch, node, restored


def _plan(value: Plan | Mapping[str, Any], key: str = "plan") -> Plan:
    if isinstance(value, Plan):
        return value
    try:
        return Plan.from_state(value)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"the state's {key} is not a plan: {exc!r:.200}") from None
