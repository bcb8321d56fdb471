"""The cross-shard duplicate audit merges in as many rounds as it takes: no ceiling on the shard count."""

from __future__ import annotations

import json
from collections import defaultdict

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from packer.keyaudit import KeyAudit, write_key_file, write_keys
from packer.rejects import RejectsReport
from shardstream.indexer import keymerge

NAMES = st.sampled_from(
    [f"k{i}" for i in range(12)] + ["é", "a\tb", "k1\x01"]
)  # a tab, a byte below NUL's peers
KEYS = st.lists(st.sets(NAMES, max_size=5), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shards=KEYS, fan_in=st.integers(2, 5))
# Twelve runs that cannot chain (each starts below where the last ended) at a fan-in of 2: three rounds,
# every time, whatever else the search draws (a plant that reused a round's file names survived a draw).
@example(shards=[{"k1", "k2"}] * 12, fan_in=2)
def test_every_round_count_finds_exactly_the_keys_in_two_or_more_shards(
    tmp_path_factory, monkeypatch, shards, fan_in
):
    # A fan-in of 2..5 over up to 40 runs takes up to 6 rounds, as 256 would past 256^5 shards.
    monkeypatch.setattr(keymerge, "FAN_IN", fan_in)
    folder = tmp_path_factory.mktemp("keys")
    runs, names = [], []
    holders: dict[str, list[str]] = defaultdict(list)
    for number, keys in enumerate(shards):
        names.append(f"s-{number:06d}.tar")
        runs.append(folder / f"{number}.keys")
        write_keys(runs[-1], {key: sample for sample, key in enumerate(sorted(keys))}, number)
        for key in keys:
            holders[key].append(names[-1])
    with RejectsReport(folder / "rejects.jsonl") as rejects:
        audit = KeyAudit(names, rejects, strict=False)
        count = write_key_file(runs, folder / "keys", folder, audit)
    reported = [json.loads(line) for line in (folder / "rejects.jsonl").read_text().splitlines()]
    found = {
        r["source"]: r["reason"].split(": ", 1)[1].removesuffix(" (kept in all)").split(", ")
        for r in reported
    }
    expected = {key: shards for key, shards in holders.items() if len(shards) > 1}
    assert found == expected and count == len(expected)
    # Every key in the key file, each time it is held.
    assert (folder / "keys").read_bytes().count(b"\n") == sum(len(s) for s in holders.values())
