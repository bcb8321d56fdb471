"""Stand-ins at their edges: every sample lost, restores with nothing owed, saves taken mid-repeat."""

from __future__ import annotations

from typing import Any

import pytest

from streamer.chain.node import Node
from streamer.chain.recovery import Recovery
from streamer.chain.standins import StandIns


class Items(Node):
    """A real node over a list: a None entry is a sample lost (one stand-in owed), anything else is handed
    out as sample ``index`` of shard 0. ``reads`` lists the ids read back by ``read_one``."""

    def __init__(self, samples: list[Any], recovery: Recovery) -> None:
        super().__init__()
        self.samples = samples
        self.recovery = recovery
        self.position = 0
        self.reads: list[int] = []

    def _current_state(self) -> dict[str, Any]:
        return {"position": self.position}

    def _generate(self, state):
        self.position = state["position"] if state else 0
        while self.position < len(self.samples):
            index = self.position
            self.position += 1
            if self.samples[index] is None:
                self.recovery.owed += 1
                continue
            yield 0, index, self.samples[index]

    def read_one(self, shard: int, index: int) -> Any:
        self.reads.append(index)
        return self.samples[index]


def _chain(samples):
    recovery = Recovery()
    source = Items(samples, recovery)
    return StandIns(source, recovery), source


def _ids(items):
    return [index for _, index, _ in items]


def test_a_rank_that_lost_every_sample_yields_nothing_and_does_not_fail():
    node, _ = _chain([None, None, None])
    assert list(node) == [] and node.get_state() == {"source": {"position": 3}, "owed": 3, "last": None}
    node.reset({"source": {"position": 2}, "owed": 2, "last": None})  # saved before anything was handed out
    assert list(node) == []


def test_a_restore_with_nothing_owed_reads_nothing_back():
    node, source = _chain([{"k": 0}, {"k": 1}, {"k": 2}])
    node.reset({"source": {"position": 2}, "owed": 0, "last": [0, 1]})
    assert _ids(node) == [2] and source.reads == []


SAMPLES = [{"k": "a"}, None, None, None, {"k": "b"}, {"k": "c"}, None]


@pytest.mark.parametrize("first", range(len(SAMPLES) + 2))
@pytest.mark.parametrize("second", range(4))
def test_saved_twice_mid_repeat_then_restored_gives_the_uninterrupted_stream(first, second):
    """The last sample's id must stay in the state after a restore re-read it, or a second save loses it."""
    full = _ids(_chain(SAMPLES)[0])
    assert full == [0, 4, 4, 4, 4, 5, 5]  # three stand-ins for the loss before b, one for the last at the end
    node, _ = _chain(SAMPLES)
    head = _ids(sample for _, sample in zip(range(first), node, strict=False))
    resumed, _ = _chain(SAMPLES)
    resumed.reset(node.get_state())
    head += _ids(sample for _, sample in zip(range(second), resumed, strict=False))
    last, _ = _chain(SAMPLES)
    last.reset(resumed.get_state())
    assert head + _ids(last) == full


def test_repeats_of_a_dict_are_fresh_copies_and_other_samples_are_repeated_as_they_are():
    node, _ = _chain([{"k": "a"}, None, None])
    first, second, third = (sample for _, _, sample in node)
    first["k"] = "edited"
    assert second == third == {"k": "a"} and second is not third
    shared = ("not", "a", "dict")
    node, _ = _chain([shared, None])
    assert [sample for _, _, sample in node] == [shared, shared]


def test_a_stand_ins_node_without_a_source_yet_has_an_empty_source_state():
    assert StandIns(None, Recovery()).get_state() == {"source": {}, "owed": 0, "last": None}  # type: ignore[arg-type]


def test_a_state_given_out_before_the_first_item_is_a_copy_the_caller_may_change():
    node, _ = _chain(SAMPLES)
    saved = {"source": {"position": 4}, "owed": 3, "last": [0, 0]}
    node.reset(saved)
    given = node.get_state()
    assert given == saved and given is not saved
    given["source"]["position"] = 99  # e.g. a checkpoint tool that rewrites what it saves
    given["last"].append(7)
    assert node.get_state() == {"source": {"position": 4}, "owed": 3, "last": [0, 0]}
    assert _ids(node) == [0, 0, 0, 4, 5, 5]  # the three owed repeats of sample 0, then on from 4
