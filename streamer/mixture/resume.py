"""Restoring a Mixture: the same mixture continues exactly; a changed one carries every source on.

A state names, for every source, where its pass stream stood at the epoch's start and how far an epoch
moves it. Loaded into the same mixture (same sources, same budgets), the saved chain continues as if never
stopped. Loaded into a changed one (weights changed, sources added or removed) at an epoch boundary,
every remaining source's pass stream goes on from where the saved run left it — no sample of a pass
repeated or skipped — and new sources start at their first pass. A change in the middle of an epoch is
refused: the other ranks' and workers' unread parts of the epoch are not in this state (the list of
every rank's states is: ``restore.py``). A state saved in an elastic restore's epoch carries its
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
from ..elastic.restore import check_identity, check_identity_keys, loader_dataset_states
from .elastic import deal_sources
from .shape import MixtureShape

FINISHED = "finished"
Origins = dict[str, tuple[int, int]]  # source name -> (epoch, where its pass stream starts then)
# An elastic restore's deal for one worker: per-source budgets, per-source spans, the sources' saved places.
Restored = tuple[list[int], list[Plan], dict[str, list[int]]]


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
        states, finished = _loader_states(state)
        states = [saved_mixture(shape, s) for s in states]
        if not states:
            raise ValueError("the loader state holds no dataset state (was it saved before the first batch?)")
        # The loader hands each worker its own state; the parent keeps none. Workers get the mixture
        # pickled: they learn that their (maybe older) snapshots' epoch is over.
        ended = int(states[0]["epoch"]) if finished else None
        origins, _ = _origins(shape, states[0], world=world, ended=finished, ended_epoch=ended)
        return Loaded(pending=None, origins=origins, ended_epoch=ended)
    state = saved_mixture(shape, state)
    origins, over = _origins(shape, state, world=world, ended=False, ended_epoch=ended_epoch)
    pending = {**state, "node": FINISHED} if over else dict(state)
    return Loaded(pending=pending, origins=origins, ended_epoch=ended_epoch)


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


def _loader_states(state: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], bool]:
    _, workers = loader_dataset_states(state) or (0, {})
    return [s for s in workers.values() if s], bool(state.get("_iterator_finished"))


def _origins(
    shape: MixtureShape, state: Mapping[str, Any], *, world: int, ended: bool, ended_epoch: int | None
) -> tuple[Origins, bool]:
    """Where each source's pass stream stands, and whether the state's epoch is over by its own chain.

    ``ended``: the state's epoch is over, whatever its chain says (a loader's snapshots can be older)."""
    saved = state.get("sources")
    if not isinstance(saved, Mapping) or "epoch" not in state:
        raise ValueError("not a Mixture state: it has no 'sources' (was it saved by a ShardDataset?)")
    epoch = int(state["epoch"])
    identity = shape.identity()
    for key in ("seed", "shuffle"):  # a changed mixture may load a state; other pass streams may not
        if key in state and state[key] != identity[key]:
            raise ValueError(
                f"the state was saved with {key}={state[key]!r}, not {identity[key]!r}; every "
                "source's pass stream depends on it"
            )
    starts = {str(name): (int(value[0]), int(value[1])) for name, value in saved.items()}
    after = {name: (epoch + 1, start + moved) for name, (start, moved) in starts.items()}
    if state.get("plan") or state.get("elastic"):  # an elastic restore's epoch: its own runs, then on
        check_identity(state, identity)  # its deal is of this mixture's streams, as the restore checked
        if sorted(starts) != sorted(shape.names):
            raise ValueError(f"the state was saved from sources {sorted(starts)}, not {sorted(shape.names)}")
        return after, False
    place = state.get("place")
    info = get_worker_info()
    world = int(place[1]) if place else world
    workers = int(place[3]) if place else (info.num_workers if info is not None else 1)
    per_epoch = dict(zip(shape.names, shape.epoch_plan(world, workers, epoch).per_epoch(), strict=True))
    at_start = {name: (epoch, start) for name, (start, _) in starts.items()}
    if {name: moved for name, (_, moved) in starts.items()} == per_epoch:
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
    if not node:  # the epoch had not begun (no chain, or one not started): it begins under the new mixture
        return at_start, False
    raise ValueError(
        f"the mixture changed (saved sources {sorted(starts)} with per-epoch amounts "
        f"{ {n: m for n, (_, m) in starts.items()} }, now {per_epoch}) but the state was saved in the "
        f"middle of epoch {epoch}; change a mixture at an epoch boundary (a state saved after an "
        "epoch's last sample, or before its first)"
    )


def resume_point(
    shape: MixtureShape, pending: dict[str, Any] | None, place: Place, epoch: int
) -> tuple[int, dict[str, Any] | str | None, Restored | None]:
    """The epoch to read (``epoch`` without a pending state), the chain state to start from (``FINISHED``:
    nothing left of that epoch) and, after an elastic restore, this place's deal."""
    if not pending:
        return epoch, None, None
    epoch, node = int(pending["epoch"]), pending.get("node")
    if "elastic" in pending:  # every old rank's leftover: this place's deal of it
        lefts = [_plan(pending["elastic"][name]) for name in shape.names]
        rank, world, worker, workers = place
        remainder = shape.placement.remainder
        budgets, plans = deal_sources(
            lefts, rank=rank, world=world, worker=worker, workers=workers, remainder=remainder
        )
        return epoch, None, (budgets, plans, dict(pending["sources"]))
    restored = None
    if pending.get("plan"):  # this place's own state from a restored epoch
        budgets, plans = _plan_of(pending["plan"], shape)
        restored = (budgets, plans, dict(pending["sources"]))
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
