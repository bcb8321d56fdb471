"""Mixture(batch_tokens=...): batches within the budget from every source, the same number on every rank
and worker, shares in tokens when asked, resumable on the same topology, and refusals that say why."""

from __future__ import annotations

import json

import numpy as np
import pytest
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from packer import PackOptions, pack
from streamer import Mixture

BUDGET = 1000


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Two costed sources: 900 short samples (median 60) and 500 long ones (median 300, some over the
    budget), packed 100 a shard."""
    root = tmp_path_factory.mktemp("mixbudget")
    rng = np.random.default_rng(0)
    out, cost_of = [], {}
    for name, median, n in (("short", 60, 900), ("long", 300, 500)):
        costs = np.exp(rng.normal(np.log(median), 0.8, n)).astype(int) + 1
        records = [{"id": f"{name}{i:05d}", "txt": "x", "num_tokens": int(c)} for i, c in enumerate(costs)]
        cost_of.update({r["id"]: r["num_tokens"] for r in records})
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        pack(root / f"{name}.jsonl", root / name, PackOptions(cost="num_tokens", max_count=100))
        out.append({"path": str(root / name), "name": name, "weight": 0.5})
    return out, cost_of


def _keys(batches):
    return [[s["__key__"] for s in batch] for batch in batches]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("batching", ["pack", "pad"])
def test_every_rank_and_worker_yields_the_same_batches_within_the_budget(sources, workers, batching):
    specs, cost_of = sources
    steps, keys = [], []
    for rank in range(3):
        mix = Mixture(specs, batch_tokens=BUDGET, batching=batching, rank=rank, world_size=3, seed=1)
        batches = list(DataLoader(mix, batch_size=None, num_workers=workers))
        steps.append((len(batches), mix.steps(workers)))
        for batch in batches:
            costs = [s["__cost__"] for s in batch]
            assert costs == [cost_of[s["__key__"]] for s in batch]
            assert (sum(costs) if batching == "pack" else len(costs) * max(costs)) <= BUDGET
            keys += [(s["__source__"], s["__key__"]) for s in batch]
        assert mix.errors["samples_left_out"] == 0
    assert len({n for n, _ in steps}) == 1 and all(n == planned for n, planned in steps)
    # The epoch reads 1,400 samples (one pass of each source's worth: "long" 1.4 passes), less the
    # overlong ones; a source read past a pass repeats only in its next pass.
    over = sum(1 for k, c in cost_of.items() if c > BUDGET and k.startswith("long"))
    assert {name for name, _ in keys} == {"short", "long"}
    assert len(keys) >= 1400 - 2 * over - 3


def test_weight_by_tokens_shares_the_cost_not_the_samples(sources):
    specs, _ = sources
    totals = {}
    for weight_by in ("samples", "tokens"):
        mix = Mixture(specs, batch_tokens=BUDGET, weight_by=weight_by, seed=2)
        tally = {"short": 0, "long": 0}
        for batch in mix:
            for s in batch:
                tally[s["__source__"]] += s["__cost__"]
        totals[weight_by] = tally
    by_samples, by_tokens = totals["samples"], totals["tokens"]
    assert by_samples["long"] > 3 * by_samples["short"]  # equal samples: the long source's cost dominates
    assert abs(by_tokens["long"] - by_tokens["short"]) <= 0.05 * sum(by_tokens.values())  # equal cost


def test_a_resumed_run_yields_the_batches_the_uninterrupted_run_did(sources):
    specs, _ = sources
    whole = _keys(Mixture(specs, batch_tokens=BUDGET, seed=3, rank=1, world_size=2))
    mix = Mixture(specs, batch_tokens=BUDGET, seed=3, rank=1, world_size=2)
    it = iter(mix)
    first = _keys(next(it) for _ in range(9))
    again = Mixture(specs, batch_tokens=BUDGET, seed=3, rank=1, world_size=2)
    again.load_state_dict(mix.state_dict())
    assert first + _keys(again) == whole


def test_a_loader_with_workers_resumes_batch_for_batch(sources):
    specs, _ = sources

    def loader():
        mix = Mixture(specs, batch_tokens=BUDGET, seed=4)
        return StatefulDataLoader(mix, batch_size=None, num_workers=2, collate_fn=lambda b: b)

    whole = [[s["__key__"] for s in b] for b in loader()]
    first_loader = loader()
    it = iter(first_loader)
    first = [[s["__key__"] for s in next(it)] for _ in range(11)]
    state = first_loader.state_dict()
    second = loader()
    second.load_state_dict(state)
    assert first + [[s["__key__"] for s in b] for b in second] == whole


def test_what_a_budgeted_mixture_refuses(sources, tmp_path):
    specs, _ = sources
    mix = Mixture(specs, batch_tokens=BUDGET, seed=5)
    next(iter(mix))
    with pytest.raises(ValueError, match="resumes on the same world size and workers only"):
        Mixture(specs, batch_tokens=BUDGET, seed=5).load_state_dict([mix.state_dict()])
    with pytest.raises(ValueError, match="with batch_tokens the budget makes the batches"):
        Mixture(specs, batch_tokens=BUDGET, stratify=8)
    with pytest.raises(ValueError, match="weight_by must be one of samples, tokens, not 'bytes'"):
        Mixture(specs, weight_by="bytes")
    with pytest.raises(TypeError, match=r"mix.steps\(num_workers\)"):
        len(mix)
    plain = Mixture(specs, seed=5)
    next(iter(plain))
    with pytest.raises(
        ValueError, match="batch_tokens changes at an epoch boundary only"
    ):  # no budget before
        Mixture(specs, batch_tokens=BUDGET, seed=5).load_state_dict(plain.state_dict())
    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "a", "txt": "x"}) + "\n")
    pack(tmp_path / "m.jsonl", tmp_path / "uncosted")
    with pytest.raises(ValueError, match=r"no cost column: pack with `shardstream pack \.\.\. --cost FIELD`"):
        Mixture([*specs, {"path": str(tmp_path / "uncosted"), "weight": 0.1}], batch_tokens=BUDGET)


def test_a_mixture_file_takes_the_budget_options(sources, tmp_path):
    specs, _ = sources
    lines = ["batch_tokens: 1000", "batching: pad", "weight_by: tokens", "seed: 1", "sources:"]
    for spec in specs:
        lines += [f"  - path: {spec['path']}", f"    name: {spec['name']}", "    weight: 0.5"]
    (tmp_path / "mix.yaml").write_text("\n".join(lines) + "\n")
    from_file = Mixture.from_yaml(tmp_path / "mix.yaml")
    direct = Mixture(specs, batch_tokens=BUDGET, batching="pad", weight_by="tokens", seed=1)
    assert _keys(from_file) == _keys(direct)


def test_a_budgeted_mixture_refuses_a_carry_a_change_mid_epoch_left(sources):
    """Weights changed mid-epoch without a budget leave part of "long" unread, carried into the next
    epoch; a budgeted mixture deals its epochs by cost and cannot read a carry, so it says so."""
    specs, _ = sources
    plain = Mixture(specs, seed=5)
    stream = iter(plain)
    for _ in range(10):
        next(stream)
    state = plain.state_dict()
    heavier = [{**spec, "weight": 0.9 if spec["name"] == "short" else 0.1} for spec in specs]
    changed = Mixture(heavier, seed=5)
    changed.load_state_dict(state)
    for _ in changed:
        pass
    end = changed.state_dict()
    following = Mixture(heavier, seed=5)
    following.load_state_dict(end)
    carried = [at for at in following.positions(1, following.shape.epoch_plan(1, 1, 1)) if at.carry]
    assert len(carried) == 1 and carried[0].carried > 0  # the part of long's run the change left unread
    with pytest.raises(ValueError, match="cannot read a carry"):
        Mixture(heavier, seed=5, batch_tokens=BUDGET).load_state_dict(end)


def test_a_budgeted_mixture_leaves_the_skipped_batches_out(sources):
    specs, _ = sources
    plain = [[s["__key__"] for s in b] for b in Mixture(specs, batch_tokens=BUDGET, seed=3)]
    mixture = Mixture(specs, batch_tokens=BUDGET, seed=3, skip_steps=[(0, 2), (7, 9)])
    got = [[s["__key__"] for s in b] for b in mixture]
    assert got == _minus_steps(plain, [(0, 2), (7, 9)])
    assert mixture.errors["samples_skipped_steps"] == sum(len(plain[i]) for i in (0, 1, 7, 8))


def _minus_steps(full, skips):
    return [batch for step, batch in enumerate(full) if not any(a <= step < b for a, b in skips)]


@pytest.mark.parametrize("workers", [0, 2])
def test_budgeted_skips_past_the_first_epoch_count_every_earlier_epochs_batches(sources, workers):
    """The epochs' batch counts differ (each reads another part of each source's passes); a step past the
    first epoch is the sum of the earlier epochs' batches plus its place in its own, so a skip there
    leaves out exactly the batches the uninterrupted run makes at those steps."""
    specs, _ = sources

    def epochs(mixture):
        out = []
        for epoch in range(3):
            mixture.set_epoch(epoch)
            batches = [
                [s["__key__"] for s in b] for b in DataLoader(mixture, batch_size=None, num_workers=workers)
            ]
            assert len(batches) == mixture.steps(workers)
            out.append(batches)
        return out

    full = epochs(Mixture(specs, batch_tokens=BUDGET, seed=3))
    counts = [len(e) for e in full]
    assert len(set(counts)) > 1  # the numbering this checks: epoch x its own batches would be off
    second, third = counts[0], counts[0] + counts[1]
    skips = [(second - 2, second + 1), (third + 3, third + 5)]
    mixture = Mixture(specs, batch_tokens=BUDGET, seed=3, skip_steps=skips)
    got = []
    for epoch in range(3):
        mixture.set_epoch(epoch)
        got += [[s["__key__"] for s in b] for b in DataLoader(mixture, batch_size=None, num_workers=workers)]
    flat = [batch for epoch in full for batch in epoch]
    if workers:  # a worker that drops a batch hands out its next one early: neighbours may swap places
        assert sorted(got) == sorted(_minus_steps(flat, skips))
    else:
        assert got == _minus_steps(flat, skips)
    assert mixture.errors["samples_skipped_steps"] == sum(len(flat[i]) for a, b in skips for i in range(a, b))
