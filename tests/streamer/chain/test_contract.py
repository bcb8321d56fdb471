"""One save/load contract that every Node subclass passes (torchdata's nodes test the same way).

For every subclass of ``Node`` in the streamer, a real chain on real shards with that node outermost:
stopped after any number of items, its state (plain data: it pickles and deep-copies to itself) loaded
into a fresh chain gives exactly the rest of the uninterrupted run; a chain reset to a state reports that
state until it moves; and the node's own keys (``state_keys``) find its state in the chain's.
"""

from __future__ import annotations

import copy
import importlib
import pickle
import pkgutil
import shutil
from collections.abc import Callable

import pytest

import streamer
from packer import PackOptions, pack
from shardstream.format import decode_offsets
from streamer import Mixture, ShardDataset
from streamer.chain.node import Node, saved_state_of
from tests.conftest import write_dataset


def _subclasses() -> set[type[Node]]:
    for module in pkgutil.walk_packages(streamer.__path__, "streamer."):
        importlib.import_module(module.name)
    found, todo = set(), [Node]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    index = write_dataset(root / "a", [9, 14, 6], prefix="a").parent
    other = write_dataset(root / "b", [11], prefix="b").parent
    hurt = root / "hurt"
    shutil.copytree(index, hurt)
    offsets = decode_offsets((hurt / "a-000001.tar.offsets").read_bytes())
    raw = bytearray((hurt / "a-000001.tar").read_bytes())
    raw[offsets[4] + 5] ^= 0x55  # sample 4's header checksum no longer matches: a loss, stood in for
    (hurt / "a-000001.tar").write_bytes(bytes(raw))
    records = root / "costed.jsonl"  # a cost column, for a token budget's batches
    records.write_text("".join(f'{{"id": "c{i:03d}", "n": {1 + i * 7 % 23}}}\n' for i in range(90)))
    pack(records, root / "costed", PackOptions(cost="n", max_count=20))
    return {"index": str(index), "other": str(other), "hurt": str(hurt), "costed": str(root / "costed")}


def _tag(sample):
    return {**sample, "seen": True}


# The chain whose outermost node is of each type (``Type[case]`` for a second chain of one type): what a
# dataset with these options assembles. These samples are small: ``defer_reads=True`` defers them anyway.
CHAINS: dict[str, Callable[[dict[str, str]], object]] = {
    "SampleReader": lambda d: ShardDataset(d["index"], decode=False, shuffle=False),
    "ShuffleBuffer": lambda d: ShardDataset(
        d["index"], decode=False, buffer_size=8, defer_reads=False, seed=1
    ),
    "Fetch": lambda d: ShardDataset(d["index"], decode=False, buffer_size=8, seed=2, defer_reads=True),
    "Mapper": lambda d: ShardDataset(d["index"], decode=_tag, buffer_size=8, seed=3),
    "StandIns": lambda d: ShardDataset(d["hurt"], decode=False, buffer_size=8, seed=4, on_error="skip"),
    "BudgetBatches": lambda d: ShardDataset(
        d["costed"], decode=False, buffer_size=8, seed=7, batch_tokens=40
    ),
    "SkipSteps": lambda d: ShardDataset(
        d["index"], decode=False, buffer_size=8, seed=8, skip_steps=[(1, 3)], batch_size=2
    ),
    "MixtureReader": lambda d: Mixture(
        [
            {"path": d["index"], "weight": 2, "decode": False},
            {"path": d["other"], "weight": 1, "decode": False},
        ],
        epoch_size=40,
        buffer_size=6,
        seed=5,
        defer_reads=False,
    ),
    "Fetch[mixture]": lambda d: Mixture(
        [
            {"path": d["index"], "weight": 2, "decode": False},
            {"path": d["hurt"], "weight": 1, "decode": False},
        ],
        epoch_size=40,
        buffer_size=12,
        seed=6,
        defer_reads=True,
        on_error="skip",  # the damaged sample is lost as it is read, after the buffer
        keep_length=False,
    ),
}


def _type_name(case: str) -> str:
    return case.split("[")[0]


def _chain(name: str, data) -> Node:
    dataset = CHAINS[name](data)
    iter(dataset)  # assembles this place's chain, reset to the start
    return dataset._chain[0]


def _ids(items) -> list[tuple[int, int, object]]:
    """Each item's id and key; a batch's, the keys of its samples."""
    return [(shard, index, _keys(sample)) for shard, index, sample in items]


def _keys(sample) -> object:
    return sample["__key__"] if isinstance(sample, dict) else tuple(s["__key__"] for s in sample)


def test_every_node_subclass_has_a_chain_in_the_contract():
    ours = {cls.__name__ for cls in _subclasses() if cls.__module__.startswith("streamer.")}  # not tests'
    assert ours == {_type_name(case) for case in CHAINS}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_a_node_continues_from_any_saved_state_exactly(name, data):
    chain = _chain(name, data)
    assert type(chain).__name__ == _type_name(name)
    full = _ids(chain)
    assert len(full) > 20
    for stop in sorted({0, 1, 2, 7, len(full) // 2, len(full) - 1, len(full)}):
        head_chain = _chain(name, data)
        head = _ids(next(head_chain) for _ in range(stop))
        state = head_chain.get_state()
        assert pickle.loads(pickle.dumps(state)) == state == copy.deepcopy(state)
        fresh = _chain(name, data)
        fresh.reset(copy.deepcopy(state))
        assert fresh.get_state() == state, "a chain reset to a state reports it until it moves"
        assert head + _ids(fresh) == full, f"{name}: resumed after {stop} items"
        if stop and type(chain).state_keys:  # a Mapper or Fetch owns no keys: its state is its source's
            own = saved_state_of(type(chain), state)
            assert own is not None and type(chain).state_keys <= own.keys()


def test_finding_a_node_state_ends_on_a_state_that_holds_itself():
    """A hostile checkpoint (a pickled dict whose "source" is itself) must not hang a restore."""
    from streamer.chain.reader import SampleReader

    looped: dict = {"owed": 0}
    looped["source"] = looped
    assert saved_state_of(SampleReader, looped) is None
    assert saved_state_of(SampleReader, {"source": {"segment": 1, "done": 2}}) == {"segment": 1, "done": 2}
