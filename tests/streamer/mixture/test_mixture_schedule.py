"""Mixture schedules on real shards through real DataLoaders: weights change at global steps on every rank
and worker alike, each source's pass read at most once, resumes exact, epochs carry the step count on."""

from __future__ import annotations

import collections
import textwrap

import pytest
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer.chain.skips import step_of
from streamer.mixture.mixture import Mixture
from streamer.mixture.schedule import shares_at
from tests.streamer.mixture.twosources import B, keys, stateful, stopped, two_mixture

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


def test_a_stage_switches_every_rank_at_its_step_and_reads_each_pass_once(two):
    """Global step 30: code from all to nothing, web the reverse. Each rank's batch i is step i; every
    batch before 30 is all code, every one from 30 all web, on both ranks, both workers."""
    code, web = {"stages": [[0, 1], [30, 0]]}, {"stages": [[0, 0], [30, 1]]}
    seen = collections.Counter()
    for rank in range(2):
        batches = list(stateful(two_mixture(two, code, web, rank=rank, world_size=2)))
        assert len(batches) == 960 // 2 // B == 60  # equal steps: the constant plan's lengths
        for step, batch in enumerate(batches):
            assert {source for source, _ in batch} == ({"code"} if step < 30 else {"web"}), step
        seen.update(batches[i][k] for i in range(60) for k in range(B))
    assert max(seen.values()) == 1  # nothing read twice in the epoch, over both ranks
    assert sum(1 for source, _ in seen if source == "code") == 2 * 30 * B


def test_a_ramp_follows_the_running_share_within_a_sample_at_every_batch_of_every_worker(two):
    """code's weight ramps 1 -> 0 over steps 0..40 (web's stays 1); each worker's counts after each of its
    batches are within one sample of the running share its steps' weights give."""
    code, web = {"ramp": [[0, 1], [40, 0]]}, 1
    mixture = two_mixture(two, code, web)
    batches = list(stateful(mixture))
    schedules = mixture.shape.schedules
    per_worker = [60 // 2] * 2
    for worker in range(2):
        mine = [batches[step_of(per_worker, worker, t)] for t in range(per_worker[worker])]
        share, count = 0, 0
        for t, batch in enumerate(mine):
            share += B * shares_at(schedules, step_of(per_worker, worker, t))[0]
            count += sum(1 for source, _ in batch if source == "code")
            assert abs(count - share) < 1, (worker, t, count, float(share))
    assert 14 <= sum(1 for b in batches[:4] for s, _ in b if s == "code") <= 17  # about half at first
    assert all(s == "web" for b in batches[40:] for s, _ in b)  # none once its weight is 0


def test_a_resumed_run_yields_the_batches_the_uninterrupted_run_did(two):
    code, web = {"ramp": [[10, 3], [50, 1]]}, {"stages": [[0, 1], [25, 2]]}
    full = list(stateful(two_mixture(two, code, web)))
    head_loader = stateful(two_mixture(two, code, web))
    head, state = stopped(head_loader, 27)
    restored = stateful(two_mixture(two, code, web))
    restored.load_state_dict(state)
    assert head + list(restored) == full


def test_the_second_epoch_carries_the_step_count_on(two):
    """A change at step 70 falls in the second epoch (60 steps each on 2 ranks): its batch 10 switches."""
    code, web = {"stages": [[0, 1], [70, 0]]}, {"stages": [[0, 0], [70, 1]]}
    mixture = two_mixture(two, code, web, rank=0, world_size=2)
    loader = stateful(mixture)
    first = list(loader)
    mixture.set_epoch(1)
    second = list(loader)
    assert all(s == "code" for b in first for s, _ in b)
    assert all(s == "code" for b in second[:10] for s, _ in b)
    assert all(s == "web" for b in second[10:] for s, _ in b)
    for epoch, batches in enumerate((first, second)):
        code_keys = [k for b in batches for s, k in b if s == "code"]
        assert len(code_keys) == len(set(code_keys)) == (480 if epoch == 0 else 80)
    # code's pass stream moved by what epoch 0 read on both ranks (2 x 480), not by a constant amount
    plan = mixture.shape.epoch_plan(2, 2, 1)
    assert [at.start for at in mixture.positions(1, plan)] == [960, 0] and plan.per_epoch() == [160, 800]


def test_a_schedule_from_yaml_and_the_options_it_refuses(two, tmp_path):
    config = tmp_path / "mix.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            epoch_size: 960
            batch_size: {B}
            sources:
              - path: {two["code"]}
                weight: {{stages: [[0, 1], [30, 0]]}}
              - path: {two["web"]}
                weight: {{stages: [[0, 0], [30, 1]]}}
            """
        )
    )
    batches = list(stateful(Mixture.from_yaml(config, buffer_size=64)))
    assert all(s == "code" for b in batches[:30] for s, _ in b)
    assert all(s == "web" for b in batches[30:] for s, _ in b)
    with pytest.raises(ValueError, match="batch_size"):
        two_mixture(two, {"stages": [[0, 1]]}, 1, batch_size=None)
    with pytest.raises(ValueError, match="stratify"):
        two_mixture(two, {"stages": [[0, 1]]}, 1, stratify=B)
    sources = [
        {"path": str(two["code"]), "weight": {"ramp": [[0, 1], [9, 2]]}},
        {"path": str(two["web"]), "repeat": 1},
    ]
    with pytest.raises(ValueError, match="every source needs a weight"):
        Mixture(sources, batch_size=B)
    with pytest.raises(ValueError, match="every source's weight is 0"):
        list(two_mixture(two, {"stages": [[0, 1], [5, 0]]}, {"stages": [[0, 1], [5, 0]]}))
    with pytest.raises(ValueError, match="neither a ShardDataset state nor"):
        two_mixture(two, {"stages": [[0, 1]]}, 1).load_state_dict([{}])


SKIPS = [(5, 9), (28, 32)]


def _minus(full, skips):
    return [batch for step, batch in enumerate(full) if not any(a <= step < b for a, b in skips)]


def test_a_scheduled_mixture_leaves_the_skipped_steps_out_on_every_rank(two):
    """Stages switch at step 30; steps 5-8 and 28-31 are left out: every rank 52 of its 60 batches, the
    others exactly the unskipped run's (a gap may swap two batches round it, as the workers finish)."""
    code, web = {"stages": [[0, 1], [30, 0]]}, {"stages": [[0, 0], [30, 1]]}
    for rank in range(2):
        full = list(
            DataLoader(
                two_mixture(two, code, web, rank=rank, world_size=2), B, num_workers=2, collate_fn=keys
            )
        )
        mixture = two_mixture(two, code, web, rank=rank, world_size=2, skip_steps=SKIPS)
        got = list(DataLoader(mixture, B, num_workers=2, collate_fn=keys))
        assert len(got) == 52 and sorted(got) == sorted(_minus(full, SKIPS))
        assert mixture.errors["samples_skipped_steps"] == 8 * B
    with pytest.raises(ValueError, match="skip_steps needs batch_size"):
        two_mixture(two, 1, 1, batch_size=None, skip_steps=SKIPS)


def test_a_resumed_mixture_with_skips_yields_what_the_uninterrupted_one_did(two):
    def loader():
        mixture = two_mixture(two, 1, 3, rank=1, world_size=2, skip_steps=SKIPS)
        return StatefulDataLoader(mixture, batch_size=B, num_workers=2, collate_fn=keys)

    whole = list(loader())
    first = loader()
    head, state = stopped(first, 7)
    second = loader()
    second.load_state_dict(state)
    assert head + list(second) == whole
