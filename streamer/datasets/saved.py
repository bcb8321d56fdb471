"""One saved state checked whole at load: its fields' types and ranges, buffered ids the reader had read.

``load_state_dict(state)`` refuses here, before any sample is read, what would otherwise fail mid-epoch,
end the epoch short or hand samples out twice: a negative or non-int ``epoch``, a ``place`` outside its
world, a ``plan``/``left`` naming samples the dataset does not hold, a shuffle buffer holding a sample its
reader had not read. Each chain node checks its own keys (``Node.check_state``); the checks that need the
dataset (its counts, the saved place's segments) are here. Trade-off: a state is walked once at load, at
O(segments read + buffered ids), the price of never continuing from one that no run could have saved.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ..budget.node import BudgetBatches
from ..chain.node import Node, check_saved_chain, is_int, saved_state_of
from ..chain.reader import SampleReader
from ..chain.shuffle import ShuffleBuffer
from ..chain.standins import StandIns
from ..elastic.deal import Plan
from ..placement.segments import Segments, check_place
from ..placement.shards import ShardList


def saved_fields(state: Any, kind: str) -> dict[str, Any]:
    """``state`` as a dict whose ``epoch`` and ``place`` are ones a ``kind`` (ShardDataset, Mixture) saves;
    ValueError naming the key and its value."""
    if not isinstance(state, Mapping):
        raise ValueError(f"a {kind} state is a dict, not a {type(state).__name__} ({state!r:.60})")
    if "_snapshot" in state or "dataset_state" in state:
        raise ValueError(
            f"this is a StatefulDataLoader's state, not a {kind}'s: give it to the loader's "
            "load_state_dict, or pass the list of every rank's ([state] on one rank) for an elastic restore"
        )
    if "epoch" not in state:
        raise ValueError(f"not a {kind} state: it has no 'epoch' (it has {sorted(state)[:8]})")
    epoch = state["epoch"]
    if not is_int(epoch) or epoch < 0:
        raise ValueError(f"the state has epoch={epoch!r:.60}; it must be an int >= 0")
    place = state.get("place")
    if place is not None:
        if not (isinstance(place, Sequence) and len(place) == 4 and all(is_int(v) for v in place)):
            raise ValueError(f"the state has place={place!r:.60}; it must be [rank, world, worker, workers]")
        try:
            check_place(*(int(v) for v in place))
        except ValueError as exc:
            raise ValueError(f"the state has place={list(place)}: {exc}") from None
    node = state.get("node")
    if node is not None and not isinstance(node, Mapping):
        raise ValueError(f"the state has node={node!r:.60}; it must be a dict (the chain's state) or None")
    if node and place is None:
        raise ValueError("the state has a chain's state (node) but no place: it is damaged")
    return dict(state)


def saved_plan(value: Any, key: str, shards: ShardList) -> Plan:
    """A saved ``Plan`` (an elastic restore's deal or leftover) naming only samples the shards hold;
    ValueError naming ``key``."""
    if shards.counts is None:
        raise ValueError(f"the state has a {key} (an elastic restore's), which needs the packer's index")
    if isinstance(value, Plan):
        plan = value
    else:
        try:
            if not isinstance(value, Mapping):
                raise TypeError(f"a {type(value).__name__}, not a dict")
            plan = Plan.from_state(value)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the state's {key} is not a plan ({{'ids', 'spans'}}): {exc!r:.200}") from None
    check_ids(plan.ids.tolist(), shards, f"{key} ids")
    return plan


def check_chain_state(
    chain: Node, node: Mapping[str, Any], shards: ShardList, *, resampled: bool = False
) -> None:
    """A saved chain's state, as ``chain`` (built for its place and epoch) would have saved it: each node's
    keys (its own check), the ids it names, and a shuffle buffer (and a budget's batching window) holding
    only what the reader had read (``resampled``: draws repeat ids by design, so only their range is
    checked)."""
    check_saved_chain(chain, node)
    reader: Node | None = chain
    while reader is not None and not isinstance(reader, SampleReader):
        reader = reader.source
    buffer = saved_state_of(ShuffleBuffer, node)
    window = saved_state_of(BudgetBatches, node)  # a token budget's batching window holds read ids too
    held = list(buffer["buffer"]) if buffer is not None else []
    if window is not None:
        ids = [entry[:2] for entry in window["pool"]]
        check_ids(ids + ([window["last"]] if window["last"] is not None else []), shards, "batching window")
        held += ids
    if held and isinstance(reader, SampleReader):
        check_ids(held, shards, "buffer")
        position = saved_state_of(SampleReader, node) or {"segment": 0, "done": 0}
        if not resampled:
            check_buffered(held, reader.segments, position["segment"], position["done"])
    last = (saved_state_of(StandIns, node) or {}).get("last")
    if last is not None:
        check_ids([last], shards, "last")


def check_ids(ids: Sequence[Sequence[int]], shards: ShardList, key: str) -> None:
    """Every (shard, index) names a sample of ``shards`` (an index within the count, where counts are
    known); ValueError naming ``key`` and the first that does not."""
    counts, n = shards.counts, len(shards)
    for shard, index in ids:
        if not 0 <= shard < n or index < 0 or (counts is not None and index >= counts[shard]):
            held = f"{n} shards" if not 0 <= shard < n or counts is None else f"{counts[shard]} samples"
            raise ValueError(f"the state's {key}: sample ({shard}, {index}) is not in the dataset ({held})")


def check_buffered(ids: Sequence[Sequence[int]], segments: Segments, segment: int, done: int) -> None:
    """Every id in a saved shuffle buffer is a sample its reader had read (``done`` of segment ``segment``
    and every segment before), and held no more often than read: else a restore hands it out twice.

    O(segments read x distinct buffered ids per shard); for endless resampled draws, where a long run has
    read millions of segments and ids repeat by design, the caller skips it."""
    held = Counter((int(s), int(i)) for s, i in ids)
    by_shard: dict[int, list[int]] = defaultdict(list)
    for shard, index in held:
        by_shard[shard].append(index)
    read: Counter[tuple[int, int]] = Counter()
    for k in range(segment + 1):
        try:
            seg = segments[k]
        except IndexError:  # the reader stands past the last segment: it read them all
            break
        stop = seg.start + done if k == segment else seg.stop
        for index in by_shard.get(seg.shard, ()):
            if seg.start <= index and (stop is None or index < stop):
                read[seg.shard, index] += 1
    for sample, n in held.items():
        if n > read[sample]:
            how = "which its reader had not read" if not read[sample] else f"{n} times, read {read[sample]}"
            raise ValueError(
                f"the saved ShuffleBuffer state's buffer holds sample {sample} {how}: a restore would hand "
                "it out again; the state is damaged"
            )
