"""Elastic resume on the pure functions: a checkpoint on W1 x K1 continued on W2 x K2 (then W3 x K3) reads
every sample of the epoch exactly once, shuffle buffers included, with equal per-rank counts after it."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.chain.node import Item, Node
from streamer.chain.shuffle import ShuffleBuffer
from streamer.elastic.deal import Plan, Progress, Stream, deal, leftover, original_plan
from streamer.placement.segments import Segment, counted_segments, rank_quota, shard_order

SEED, EPOCH = 11, 3


class IdReader(Node):
    """SampleReader's walk over segments without the tars: items are ids; the state is the reader's own,
    ``{"segment": k, "done": n}``, and moves on to the next segment only when asked for its next item."""

    def __init__(self, segments: list[Segment]) -> None:
        super().__init__()
        self.segments = segments
        self.segment = self.done = 0

    def _current_state(self) -> dict[str, Any]:
        return {"segment": self.segment, "done": self.done}

    def read_one(self, shard: int, index: int) -> Any:
        return None

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        assert state is None
        for k, segment in enumerate(self.segments):
            self.segment, self.done = k, 0
            for index in range(segment.start, segment.stop):
                self.done += 1
                yield segment.shard, index, None
        self.segment, self.done = len(self.segments), 0


def _run(
    plans: list[Plan], stream: Stream, *, buffer: int, stops: random.Random | None
) -> tuple[list[tuple[int, int]], list[Progress]]:
    """Read each worker's plan through a shuffle buffer, up to a random stop (``stops``) or to its end."""
    handed: list[tuple[int, int]] = []
    progress = []
    for g, plan in enumerate(plans):
        segments = stream.segments(plan)
        reader = IdReader(segments)
        chain: Node = ShuffleBuffer(reader, size=buffer, initial=None, seed=g) if buffer > 1 else reader
        stop = len(plan) if stops is None else _stop(stops, len(plan))
        it = iter(chain)
        handed += [next(it)[:2] for _ in range(stop)]
        state = chain.get_state() or {}
        reader_state = state.get("source", state) if buffer > 1 else state
        buffered = tuple(tuple(i) for i in state.get("buffer", ())) if buffer > 1 else ()
        segment, done = reader_state.get("segment", 0), reader_state.get("done", 0)
        read = stream.read(plan, segment, done)
        assert read == sum(s.stop - s.start for s in segments[:segment]) + done
        progress.append(Progress(plan, read, buffered))  # type: ignore[arg-type]
    return handed, progress


def _stop(rng: random.Random, length: int) -> int:
    return rng.choice([0, length, rng.randint(0, length), rng.randint(0, min(length, 3))])


def _dealt(left: Plan, world: int, workers: int, remainder: str) -> list[Plan]:
    """Every new worker's plan, checked: worker i the same length on every rank, ranks equal."""
    k = max(workers, 1)
    plans = [
        deal(left, rank=r, world=world, worker=w, workers=k, remainder=remainder)
        for r in range(world)
        for w in range(k)
    ]
    lengths = np.array([len(p) for p in plans]).reshape(world, k)
    assert (lengths == lengths[0]).all()
    assert (lengths.sum(axis=1) == rank_quota(len(left), world, remainder)).all()
    return plans


topology = st.tuples(st.integers(1, 64), st.integers(0, 8))


@settings(max_examples=150, deadline=None)
@given(
    counts=st.lists(st.integers(0, 40), min_size=1, max_size=30).filter(lambda c: sum(c) > 0),
    old=topology,
    new=topology,
    third=topology,
    remainder=st.sampled_from(["drop", "pad"]),
    buffer=st.sampled_from([1, 2, 7, 40]),
    stop_seed=st.integers(0, 2**32),
)
def test_restore_on_any_topology_reads_the_epoch_exactly_once(
    counts, old, new, third, remainder, buffer, stop_seed
):
    counts_arr = np.array(counts, dtype=np.int64)
    total = int(counts_arr.sum())
    stream = Stream(counts_arr, shard_order(len(counts), SEED, EPOCH, True))
    (w1, k1), (w2, k2), (w3, k3) = old, new, third
    k1 = max(k1, 1)  # 0 workers reads as one worker in the main process
    plans = [
        original_plan(total, rank=r, world=w1, worker=w, workers=k1, remainder=remainder)
        for r in range(w1)
        for w in range(k1)
    ]
    # The plan is exactly what placement reads today.
    for g, plan in enumerate(plans):
        expected = counted_segments(
            counts_arr,
            rank=g // k1,
            world=w1,
            worker=g % k1,
            workers=k1,
            seed=SEED,
            epoch=EPOCH,
            remainder=remainder,
        )
        assert stream.segments(plan) == expected
    epoch = Counter(
        i for p in plans for s in stream.segments(p) for i in ((s.shard, j) for j in range(s.start, s.stop))
    )
    stops = random.Random(stop_seed)

    before1, progress1 = _run(plans, stream, buffer=buffer, stops=stops)
    left1 = leftover(progress1)
    assert len(left1) + len(before1) == sum(epoch.values())
    assert len(left1.spans) <= w1 * k1
    plans2 = _dealt(left1, w2, k2, remainder)
    before2, progress2 = _run(plans2, stream, buffer=buffer, stops=stops)
    left2 = leftover(progress2)
    assert len(left2.spans) <= w1 * k1 + 2 * w2 * max(k2, 1)  # pieces stay O(workers), never O(samples)
    plans3 = _dealt(left2, w3, k3, remainder)
    after, _ = _run(plans3, stream, buffer=buffer, stops=None)

    got = Counter(before1 + before2 + after)
    if remainder == "drop":
        assert max(got.values(), default=1) == 1  # nothing twice
        assert set(got) <= set(epoch)
        assert sum(epoch.values()) - len(got) <= (w2 - 1) + (w3 - 1)  # each restore drops < its world
    else:
        assert set(got) == set(epoch)  # nothing lost
        assert sum(got.values()) - sum(epoch.values()) <= (w2 - 1) + (w3 - 1)


# The leftovers test_deal_cuts_exactly deals, and the longer of the plans it expects (rank by rank, worker
# by worker), named so that each case of its table stays one line.
IDS_THEN_SPAN = Plan(tuple((0, i) for i in range(5)), ((20, 30),))
ONLY_IDS = Plan(((1, 0), (1, 1), (1, 2)), ())
SPANS_OF_SEVERAL = Plan((), ((0, 3), (10, 12), (40, 45)))
IDS_THEN_SPAN_DROPPED = [
    Plan(((0, 0), (0, 1)), ((20, 22),)),
    Plan(((0, 2),), ((22, 24),)),
    Plan(((0, 3),), ((24, 27),)),
    Plan(((0, 4),), ((27, 29),)),
]
IDS_THEN_SPAN_PADDED = [
    Plan(((0, 0), (0, 1)), ((20, 22),)),
    Plan(((0, 2),), ((22, 25),)),
    Plan(((0, 3),), ((25, 28),)),
    Plan(((0, 4),), ((28, 30), (20, 21))),
]
SPANS_OF_SEVERAL_DEALT = [Plan((), ((0, 3), (10, 11))), Plan((), ((11, 12), (40, 42))), Plan((), ((42, 45),))]


@pytest.mark.parametrize(
    ("left", "world", "workers", "remainder", "expected"),
    [
        # 5 ids, 10 span positions, 2 ranks x 2 workers of 4 and 3: 7 a rank, the span's last one dropped.
        (IDS_THEN_SPAN, 2, 2, "drop", IDS_THEN_SPAN_DROPPED),
        # pad: 15 -> 8 a rank; the extra one repeats the spans' first position.
        (IDS_THEN_SPAN, 2, 2, "pad", IDS_THEN_SPAN_PADDED),
        # Only ids left, pad: they repeat from the first.
        (ONLY_IDS, 2, 1, "pad", [Plan(((1, 0), (1, 1)), ()), Plan(((1, 2), (1, 0)), ())]),
        # Only ids left, drop: the last one goes.
        (ONLY_IDS, 2, 1, "drop", [Plan(((1, 0),), ()), Plan(((1, 1),), ())]),
        # Spans from several workers: a new worker's share crosses from one to the next.
        (SPANS_OF_SEVERAL, 1, 3, "drop", SPANS_OF_SEVERAL_DEALT),
        # Nothing left: every worker gets nothing.
        (Plan(), 3, 2, "pad", [Plan()] * 6),
    ],
)
def test_deal_cuts_exactly(left, world, workers, remainder, expected):
    got = [
        deal(left, rank=r, world=world, worker=w, workers=workers, remainder=remainder)
        for r in range(world)
        for w in range(workers)
    ]
    assert got == expected


def test_leftover_joins_neighbouring_slices_and_keeps_buffers_first():
    plans = [Plan((), ((0, 5),)), Plan((), ((5, 10),)), Plan(((3, 1), (3, 2)), ((20, 25),))]
    progress = [Progress(plans[0], 2, ((7, 0),)), Progress(plans[1], 0), Progress(plans[2], 1, ((8, 8),))]
    assert leftover(progress) == Plan(((7, 0), (8, 8), (3, 2)), ((2, 10), (20, 25)))


def test_plan_after_and_its_state():
    plan = Plan(((4, 1), (4, 2)), ((0, 3), (9, 10)))
    assert [plan.after(n) for n in (0, 1, 2, 4, 6)] == [
        plan,
        Plan(((4, 2),), ((0, 3), (9, 10))),
        Plan((), ((0, 3), (9, 10))),
        Plan((), ((2, 3), (9, 10))),
        Plan(),
    ]
    assert Plan.from_state(plan.to_state()) == plan
    with pytest.raises(ValueError, match=r"read must be in \[0, 6\], not 7"):
        plan.after(7)
    with pytest.raises(ValueError, match=r"^a plan holds an empty or reversed span$"):
        Plan.from_state({"ids": [], "spans": [[5, 5]]})
    with pytest.raises(ValueError, match=r"^a plan holds an empty or reversed span$"):
        Plan.from_state({"ids": [], "spans": [[-1, 3]]})
    with pytest.raises(ValueError, match=r"^a plan holds a negative sample id$"):
        Plan.from_state({"ids": [[0, 1], [3, -1]], "spans": []})


@pytest.mark.parametrize(
    "ids", [[[1, 2, 3]], [1, 2], [[[1, 2]]], [[1, "x"]]], ids=["triple", "flat", "nested", "text"]
)
def test_ids_that_are_not_pairs_of_ints_are_refused(ids):
    with pytest.raises(ValueError, match=r"sample ids must be|invalid literal"):
        Plan.from_state({"ids": ids, "spans": []})


def test_plans_hold_read_only_copies_of_their_ids():
    source = np.array([[4, 1], [4, 2]])
    plan = Plan(source, ())
    source[0, 0] = 99  # the caller's array changes; the plan does not
    assert plan.ids.tolist() == [[4, 1], [4, 2]] and plan.ids.dtype == np.int64
    with pytest.raises(ValueError, match="read-only"):
        plan.ids[0, 0] = 5
    assert plan.after(1).ids.tolist() == [[4, 2]] and Plan().ids.shape == (0, 2)
    assert plan != Plan(((4, 1),), ()) and plan != "a plan" and plan == Plan([[4, 1], [4, 2]], ())
