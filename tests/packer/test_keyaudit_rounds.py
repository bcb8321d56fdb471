"""The cross-shard duplicate audit merges in as many rounds as it takes: no ceiling on the shard count."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import packer.keyaudit as keyaudit
from packer.keyaudit import find_duplicates, write_keys

NAMES = st.sampled_from([f"k{i}" for i in range(12)] + ["é", "a\tb"])  # a tab: the round files' separator
KEYS = st.lists(st.sets(NAMES, max_size=5), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shards=KEYS, fan_in=st.integers(2, 5))
def test_every_round_count_finds_exactly_the_keys_in_two_or_more_shards(
    tmp_path_factory, monkeypatch, shards, fan_in
):
    # A fan-in of 2..5 over up to 40 files takes up to 6 rounds, as 256 would past 256^5 shards.
    monkeypatch.setattr(keyaudit, "_MAX_OPEN", fan_in)
    folder = tmp_path_factory.mktemp("keys")
    files = []
    holders: dict[str, list[str]] = defaultdict(list)
    for number, keys in enumerate(shards):
        name = f"s-{number:06d}.tar"
        write_keys(folder / f"{number}.keys", keys)
        files.append((folder / f"{number}.keys", name))
        for key in keys:
            holders[key].append(name)
    found = dict(find_duplicates(files, folder))
    assert found == {key: names for key, names in sorted(holders.items()) if len(names) > 1}
