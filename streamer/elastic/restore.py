"""Restoring a ShardDataset from every old rank's state, on any ranks x workers: checked, then the leftover.

Loaded with its own state, a ShardDataset continues identically, on the same (world, workers) only. Loaded
with the list of every old rank's states — its dataset states, or StatefulDataLoader states holding them,
gathered once (``torch.distributed.all_gather_object``) and saved the same on every rank — it continues on
any (world, workers): ``elastic.leftover`` finds what no old worker handed out, buffered samples included,
and each new worker reads its ``elastic.deal`` of that. Gathering, rather than a state derivable on every
rank from (seed, epoch, step), keeps the shuffle buffers: their contents depend on every sample read, so
deriving them means replaying the epoch. The price is the gather, O(ranks x (workers + buffered ids)).

Every check runs in ``load_state_dict``, before any sample is read: a state from another dataset, seed or
shard order, from an older shardstream, with ranks or workers missing, or malformed, is a ValueError.
Stand-ins still owed at the checkpoint are not carried over: they repeat real samples only to keep the
old ranks equal, and the new ranks are equal by construction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..chain.node import saved_state_of
from ..chain.reader import SampleReader
from ..chain.shuffle import ShuffleBuffer
from ..datasets.saved import check_ids
from ..placement.segments import shard_order
from ..placement.shards import ShardList
from .deal import Plan, Progress, Stream, leftover, original_plan, sample_ids

IDENTITY = ("dataset", "seed", "shuffle", "remainder")  # what a state must share with the dataset


def dataset_digest(shards: ShardList) -> str:
    """Names the data a state belongs to: the shards' checksums when the index has them, else the counts."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(len(shards)).encode())
    if shards.counts is not None:
        digest.update(np.ascontiguousarray(shards.counts, dtype="<i8").tobytes())
    checksums = [shards.sha256(i) for i in (0, len(shards) - 1)]
    if all(checksums):
        digest.update("".join(checksums).encode())  # type: ignore[arg-type]
    else:
        digest.update(f"{shards.urls[0].rsplit('/', 1)[-1]}:{shards.urls[-1].rsplit('/', 1)[-1]}".encode())
    return digest.hexdigest()


def elastic_pending(
    states: Sequence[Any],
    *,
    identity: Mapping[str, Any],
    shards: ShardList,
    original: Callable[[int, int, int, int, int], Plan] | None = None,
    held: Callable[[Mapping[str, Any]], Any] | None = None,
) -> dict[str, Any] | None:
    """The pending restore for every old rank's states: ``{"epoch", "left": Plan}`` or a fresh epoch.

    ``original``: (epoch, rank, world, worker, workers) -> what that worker's chain reads when no
    restore dealt it (None: ``original_plan``'s equal sample quotas; a token budget's are equal costs);
    ``held``: a saved chain's state -> ids it held past its shuffle buffer (a budget's batching window)."""
    if shards.counts is None:
        raise ValueError("an elastic restore needs per-shard sample counts: pass the packer's index")
    ranks = [rank_states(state, i) for i, state in enumerate(states)]
    if not ranks:
        raise ValueError("the list of states is empty: pass every old rank's state, in rank order")
    if all(finished for finished, _ in ranks):
        return None  # the epoch is over on every rank: the next one starts afresh, as set_epoch says
    workers = [w for _, rank_workers in ranks for w in rank_workers]
    for w in workers:
        check_identity(w, identity)
    epoch = one_epoch(workers)
    lefts = [w["left"] for w in workers if "left" in w]
    if lefts:  # saved after an elastic load, before reading: what was left is still left, on any topology
        if len(lefts) != len(workers) or any(left != lefts[0] for left in lefts):
            raise ValueError("the states mix a pending elastic restore with others: gather them at one step")
        return {"epoch": epoch, "left": Plan.from_state(lefts[0])}
    placed = [w for w in workers if w.get("place")]
    if not placed:
        return {"epoch": epoch, "node": None}  # no worker had begun the epoch
    world, k = topology(placed, len(states))
    stream = Stream(
        shards.counts, shard_order(len(shards), int(identity["seed"]), epoch, bool(identity["shuffle"]))
    )
    total = stream.total
    by_place = {
        place: _progress(w, stream, total, world, k, identity["remainder"], original, held, shards)
        for place, w in by_place_of(placed).items()
    }
    dealt = any(w.get("plan") is not None for w in placed)
    progress = []
    for rank in range(world):
        for worker in range(k):
            if (rank, worker) not in by_place:
                if dealt:  # a restored run: the missing worker's plan is known only to its own state
                    raise ValueError(f"no state for rank {rank} worker {worker}: pass every rank's state")
                plan = (
                    original(epoch, rank, world, worker, k)
                    if original is not None
                    else original_plan(
                        total,
                        rank=rank,
                        world=world,
                        worker=worker,
                        workers=k,
                        remainder=identity["remainder"],
                    )
                )
                by_place[rank, worker] = Progress(plan, 0)  # it had not begun: all of its slice is left
            progress.append(by_place[rank, worker])
    return {"epoch": epoch, "left": leftover(progress)}


def loader_dataset_states(state: Mapping[str, Any]) -> tuple[int, dict[int, Any]] | None:
    """A StatefulDataLoader's state read: (its ``num_workers``, each worker's dataset state by worker, None
    where a worker saved none); without workers, ``(0, {0: its dataset state})``. None: not a loader's
    state. ValueError if its worker snapshots are not the loader's ``worker_0`` .. ``worker_{n-1}``."""
    if "_snapshot" in state:  # a StatefulDataLoader with workers: the main snapshot holds no dataset state
        snapshot = state["_snapshot"]
        snapshots = (snapshot.get("_worker_snapshots") if isinstance(snapshot, Mapping) else None) or {}
        if not (
            isinstance(snapshots, Mapping)
            and sorted(snapshots) == sorted(f"worker_{i}" for i in range(len(snapshots)))
            and all(isinstance(s, Mapping) for s in snapshots.values())
        ):
            raise ValueError(
                f"the StatefulDataLoader state's worker snapshots are {snapshots!r:.80}: it is damaged"
            )
        return len(snapshots), {
            int(key.rpartition("_")[2]): s.get("dataset_state") for key, s in snapshots.items()
        }
    if "dataset_state" in state:  # a StatefulDataLoader without workers
        return 0, {0: state["dataset_state"]}
    return None


def rank_states(state: Any, i: int) -> tuple[bool, list[Mapping[str, Any]]]:
    """(finished, the dataset states) of one rank's entry: a dataset state or a StatefulDataLoader's."""
    if not isinstance(state, Mapping):
        raise ValueError(f"state {i} is a {type(state).__name__}, not a state dict")
    if "_snapshot" in state and state.get("_steps_since_snapshot"):
        raise ValueError(
            f"state {i} is a StatefulDataLoader state whose worker snapshots are "
            f"{state['_steps_since_snapshot']} steps behind (snapshot_every_n_steps > 1); an elastic "
            "restore cannot replay those steps: save with snapshot_every_n_steps=1"
        )
    loader = loader_dataset_states(state)
    if loader is not None:
        found = loader[1].values()
        return bool(state.get("_iterator_finished")), [s for s in found if s]
    if "epoch" in state and ("node" in state or "left" in state):
        return False, [state]
    raise ValueError(f"state {i} is neither a ShardDataset state nor a StatefulDataLoader state")


def check_identity(state: Mapping[str, Any], identity: Mapping[str, Any]) -> None:
    """ValueError unless ``state`` holds every ``IDENTITY`` key, each equal to ``identity``'s."""
    check_identity_keys(state)
    for key in IDENTITY:
        if state[key] != identity[key]:
            what = "another dataset" if key == "dataset" else f"{key}={state[key]!r}, not {identity[key]!r}"
            raise ValueError(f"the state was saved from {what}; the epoch's order depends on it")


def check_identity_keys(state: Mapping[str, Any]) -> None:
    """ValueError unless ``state`` holds every ``IDENTITY`` key (a changed mixture may differ in some)."""
    missing = [key for key in IDENTITY if key not in state]
    if missing:
        raise ValueError(
            f"a state lacks {missing}: it was saved by a shardstream without elastic restore, or is not "
            "a state of this kind of dataset; what a state continues depends on them, so save it again"
        )


def one_epoch(workers: Sequence[Mapping[str, Any]]) -> int:
    """The epoch every worker's state was saved in; ValueError if they differ."""
    epochs = {int(w["epoch"]) for w in workers}
    if len(epochs) != 1:
        raise ValueError(f"the states are from different epochs {sorted(epochs)}: gather them at one step")
    return epochs.pop()


def by_place_of(placed: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], Mapping[str, Any]]:
    """Placed worker states by (rank, worker); ValueError if a place comes twice."""
    by_place: dict[tuple[int, int], Mapping[str, Any]] = {}
    for w in placed:
        rank, _, worker, _ = (int(v) for v in w["place"])
        if (rank, worker) in by_place:
            raise ValueError(f"two states for rank {rank} worker {worker}: pass each rank's state once")
        by_place[rank, worker] = w
    return by_place


def topology(states: list[Mapping[str, Any]], ranks: int) -> tuple[int, int]:
    places = {(int(s["place"][1]), int(s["place"][3])) for s in states}
    if len(places) != 1:
        raise ValueError(f"the states were saved on different (world, workers): {sorted(places)}")
    ((world, workers),) = places
    if world != ranks:
        raise ValueError(
            f"the states were saved on {world} ranks but {ranks} were given: pass every rank's state, "
            "gathered (torch.distributed.all_gather_object) and saved together, as the README's resume "
            "section shows"
        )
    return world, workers


def _progress(
    state: Mapping[str, Any],
    stream: Stream,
    total: int,
    world: int,
    workers: int,
    remainder: str,
    original: Callable[[int, int, int, int, int], Plan] | None = None,
    held: Callable[[Mapping[str, Any]], Any] | None = None,
    shards: ShardList | None = None,
) -> Progress:
    """One old worker's plan, how far its reader got and what its buffer held, from its saved chain."""
    rank, _, worker, _ = (int(v) for v in state["place"])
    try:
        if state.get("plan") is not None:
            plan = Plan.from_state(state["plan"])
        elif original is not None:
            plan = original(int(state["epoch"]), rank, world, worker, workers)
        else:
            plan = original_plan(
                total, rank=rank, world=world, worker=worker, workers=workers, remainder=remainder
            )
        node = state["node"]
        if not node:  # placed, not yet begun
            return Progress(plan, 0)
        buffer, reader = saved_state_of(ShuffleBuffer, node), saved_state_of(SampleReader, node)
        if reader is None:
            raise KeyError("segment")  # no node of the chain has the reader's state
        buffered = sample_ids(buffer["buffer"]) if buffer is not None else sample_ids(())
        if held is not None:  # ids a later node held too (a budget's window): left like the buffer's
            buffered = sample_ids(np.concatenate([buffered, sample_ids(held(node))]))
        if shards is not None:  # an id past the dataset fails here, named, not mid-epoch in a worker
            check_ids(buffered.tolist(), shards, "buffer")
        read = stream.read(plan, int(reader["segment"]), int(reader["done"]))
        return Progress(plan, read, buffered)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"the state of rank {rank} worker {worker} is damaged: {exc!r}") from exc
