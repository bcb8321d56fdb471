"""Weights and schedules changed in the middle of an epoch, on real shards through real DataLoaders: the
change is taken at the next step on every rank alike, steps stay equal, each source's pass is read
without a repeat or a skip (its unread part carried into the next epoch when the new weights want less),
and a state saved after the change resumes exactly."""

from __future__ import annotations

import collections
import copy

import pytest

from tests.streamer.mixture.twosources import B, stateful, stopped, two_mixture

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
STEPS = 60  # per rank and epoch: 960 samples over 2 ranks in batches of 8


def _changed_at(two, before, after, step, rank, **options):
    """Rank ``rank``: ``step`` batches under ``before``, then the rest of the epoch under ``after`` (the
    loader's state loaded into the changed mixture only, read through a new loader), and the mixture."""
    loader = stateful(two_mixture(two, *before, rank=rank, world_size=2, **options))
    head, state = stopped(loader, step)
    del loader  # its workers end with its iterator, before the changed mixture starts its own
    changed = two_mixture(two, *after, rank=rank, world_size=2, **options)
    changed.load_state_dict(state)
    return head, list(stateful(changed)), changed


def _reads(batches, source):
    return collections.Counter(key for batch in batches for name, key in batch if name == source)


def _prefix(mixture, source, n):
    """The keys at the first ``n`` positions of a source's pass stream, counted: what reading it without
    a repeat or a skip reads (write_dataset's keys: ``s{shard}-{index}``)."""
    j = mixture.names.index(source)
    stream, base = mixture.shape.pass_stream(j), mixture.shape.bases[j]
    return collections.Counter(f"s{s - base:03d}-{i:05d}" for s, i in map(stream.at, range(n)))


def test_a_schedule_changed_mid_epoch_is_taken_at_the_next_step_on_every_rank_with_each_pass_once(two):
    """Under the first schedule code is read until step 30, web after. At step 7 the schedule is turned
    round: steps 7-29 read web only, 30-59 code only, on both ranks. Code's run (480) is read whole and
    112 more past it; web leaves 112 of its run unread, carried into epoch 1 (web again from step 90)."""
    before = ({"stages": [[0, 1], [30, 0]]}, {"stages": [[0, 0], [30, 1]]})
    after = ({"stages": [[0, 0], [30, 1], [90, 0]]}, {"stages": [[0, 1], [30, 0], [90, 1]]})
    epochs: list[list] = [[], []]
    unchanged = []  # epoch 0 under the first schedule alone: its runs
    for rank in range(2):
        unchanged += list(stateful(two_mixture(two, *before, rank=rank, world_size=2)))
        head, rest, changed = _changed_at(two, before, after, 7, rank)
        batches = head + rest
        assert len(batches) == STEPS  # equal steps: the rest is what each worker had left
        for step, batch in enumerate(batches):
            want = {"code"} if step < 7 or step >= 30 else {"web"}
            assert {source for source, _ in batch} == want, (rank, step)
        epochs[0] += batches
        changed.set_epoch(1)
        second = list(stateful(changed))
        assert len(second) == STEPS
        epochs[1] += second
    code0, web0 = _reads(epochs[0], "code"), _reads(epochs[0], "web")
    assert max(code0.values()) == max(web0.values()) == 1  # nothing twice in the epoch, over both ranks
    assert sum(code0.values()) == 2 * (7 + 30) * B == 592 and sum(web0.values()) == 2 * 23 * B == 368
    # Epoch 1 reads web at steps 90-119, 480 samples: its carried 112 (the part of its epoch-0 run the
    # change left unread) among them, and none twice over both epochs.
    run = set(_reads(unchanged, "web"))
    web1 = _reads(epochs[1], "web")
    assert len(run) == 480 and set(web0) < run and run - set(web0) <= set(web1)
    assert sum(web1.values()) == 480 and not set(web1) & set(web0) and max(web1.values()) == 1
    # Over both epochs each source read exactly the first positions of its stream: 592 + 480 of code's
    # (its run, 112 past it, then epoch 1's), 368 + 480 of web's (its run whole, then 368 past it).
    assert _reads(epochs[0] + epochs[1], "code") == _prefix(changed, "code", 592 + 480)
    assert _reads(epochs[0] + epochs[1], "web") == _prefix(changed, "web", 368 + 480)


def test_weights_changed_mid_epoch_carry_the_unread_part_and_every_pass_is_whole(two):
    """1:1 then, from step 10, 1:3. Code's unread 400 of its run: the rest wants 200 of it, the other 200
    are carried; web's rest wants 600, 200 past its run. Over four epochs each source reads exactly the
    first positions of its stream, each once (1,000 of code's, 2,840 of web's): no skip, no repeat."""
    batches: list = []
    for rank in range(2):
        head, rest, changed = _changed_at(two, (1, 1), (1, 3), 10, rank)
        assert len(head) + len(rest) == STEPS
        code = sum(1 for batch in rest for source, _ in batch if source == "code")
        assert code == 200 // 2  # the rest's share: a quarter of 2 x 50 x 8, half on each rank
        loader = stateful(changed)
        epochs = [head + rest]
        for epoch in (1, 2, 3):
            changed.set_epoch(epoch)
            epochs.append(list(loader))
            assert len(epochs[-1]) == STEPS
        batches += [b for e in epochs for b in e]
        if rank == 0:  # epoch 1: 120 code samples on each rank, rank 0's all from code's carry of 200
            assert sum(1 for b in epochs[1] for s, _ in b if s == "code") == 120
    # Exactly the first 1,000 positions of code's stream and 2,840 of web's: its run, its carry, its next.
    assert _reads(batches, "code") == _prefix(changed, "code", 80 + 200 + 3 * 240)
    assert _reads(batches, "web") == _prefix(changed, "web", 80 + 600 + 3 * 720)


def test_a_state_saved_after_a_change_resumes_exactly_and_changes_again(two):
    """Inside the rest of a changed epoch, and in the carried epoch after it: a loader's state resumes
    batch for batch; and the rest can change again mid-way, still with equal steps and nothing twice."""
    head, rest, changed = _changed_at(two, (1, 1), (1, 3), 10, 0)
    loader = stateful(changed)
    part, state = stopped(loader, 13)
    resumed = stateful(two_mixture(two, 1, 3, rank=0, world_size=2))
    resumed.load_state_dict(state)
    assert part + list(resumed) == rest
    worker = state["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"]
    with pytest.raises(ValueError, match="not of its place's world and workers"):  # a rest of another world
        two_mixture(two, 1, 3, rank=0, world_size=2).load_state_dict(
            {**worker, "rest": {**worker["rest"], "world": 5}}
        )
    # A second change at step 10 + 13 of the same epoch, from the rest's own state.
    again = two_mixture(two, 3, 1, rank=0, world_size=2)
    again.load_state_dict(state)
    tail = list(stateful(again))
    assert len(head) + len(part) + len(tail) == STEPS
    seen = _reads(head + part + tail, "code") + _reads(head + part + tail, "web")
    assert max(seen.values()) == 1
    code, total = (sum(1 for b in tail for s, _ in b if s == "code"), sum(map(len, tail)))
    assert abs(code - 3 * total / 4) <= 2
    # The carried epoch (epoch 1 of the 1:3 mixture) resumes exactly too.
    changed.set_epoch(1)
    full = list(stateful(changed))
    loader = stateful(changed)
    first, state = stopped(loader, 9)
    resumed = stateful(two_mixture(two, 1, 3, rank=0, world_size=2))
    resumed.load_state_dict(state)
    assert first + list(resumed) == full


def test_one_process_changes_mid_epoch_and_what_cannot_change_is_refused(two):
    mixture = two_mixture(two, 1, 1, batch_size=None)
    head, state = stopped(mixture, 100)
    changed = two_mixture(two, 1, 4, batch_size=None)
    changed.load_state_dict(state)
    rest = list(changed)
    assert len(head) + len(rest) == 960
    assert sum(1 for s in rest if s["__source__"] == "code") == 860 // 5
    keys = [(s["__source__"], s["__key__"]) for s in head + rest]
    assert len(keys) == len(set(keys))
    with pytest.raises(ValueError, match="only weights and schedules may change"):
        two_mixture(two, 1, 4, batch_size=None, epoch_size=800).load_state_dict(state)
    with pytest.raises(ValueError, match="does not name the weights"):
        two_mixture(two, 1, 4, batch_size=None).load_state_dict(
            {k: v for k, v in state.items() if k != "weights"}
        )
    for carry, named in (({"code": [[5, 3]]}, r"carry\['code'\]"), ({"gone": [[0, 3]]}, "carry=")):
        with pytest.raises(ValueError, match=named):  # a damaged carry, refused before any sample is read
            two_mixture(two, 1, 1, batch_size=None).load_state_dict({**state, "carry": carry})
    shares = [["code", "weight", "Fraction", "1/0"], ["web", "weight", "float", "1e999"]]
    for bad in (shares, [shares[1], shares[0]]):  # weights no mixture saves: a clear error, not a crash
        weights = {**state["weights"], "shares": bad}
        with pytest.raises(ValueError, match="are not a mixture's"):
            two_mixture(two, 1, 4, batch_size=None).load_state_dict({**state, "weights": weights})
    _, loader_state = stopped(stateful(two_mixture(two, 1, 1)), 1)
    worker_state = loader_state["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"]
    with pytest.raises(ValueError, match="one DataLoader worker's of 2"):
        two_mixture(two, 1, 4).load_state_dict(worker_state)


def test_a_scheduled_mixture_restores_on_another_topology_and_keeps_its_schedule(two):
    """Checkpoint at step 7 of 2 ranks x 2 workers (code until step 30, web after), restored on 3 ranks x 1
    worker: equal steps, the stage still switches at step 30, nothing read twice; what the schedule left
    of web's epoch run is carried into epoch 1 (all web on 3 ranks) and read there."""
    before = ({"stages": [[0, 1], [30, 0]]}, {"stages": [[0, 0], [30, 1]]})
    states, head, unchanged = [], [], []
    for rank in range(2):
        loader = stateful(two_mixture(two, *before, rank=rank, world_size=2))
        taken, state = stopped(loader, 7)
        head += taken
        states.append(state)
        unchanged += list(stateful(two_mixture(two, *before, rank=rank, world_size=2)))
    rests, nexts = [], []
    for rank in range(3):
        mixture = two_mixture(two, *before, rank=rank, world_size=3)
        mixture.load_state_dict(states)
        rests.append(list(stateful(mixture, workers=1)))
        mixture.set_epoch(1)
        nexts.append(list(stateful(mixture, workers=1)))
    # 848 samples left: 282 a rank (the 2 over carried on), 36 batches each, steps 7-42.
    assert [len(rest) for rest in rests] == [36] * 3 and [len(n) for n in nexts] == [40] * 3
    for rest in rests:
        for t, batch in enumerate(rest):
            assert {source for source, _ in batch} == ({"code"} if 7 + t < 30 else {"web"}), t
    epoch0 = head + [b for rest in rests for b in rest]
    epoch1 = [b for n in nexts for b in n]
    assert all(source == "web" for batch in epoch1 for source, _ in batch)
    code, web = _reads(epoch0, "code"), _reads(epoch0 + epoch1, "web")
    assert max(code.values()) == 1 and sum(code.values()) == 112 + 3 * 184
    assert max(web.values()) == 1 and sum(web.values()) == 3 * 98 + 960
    assert set(_reads(unchanged, "web")) <= set(web)  # web's whole epoch-0 run: none of it skipped
    assert code == _prefix(mixture, "code", 112 + 3 * 184)  # exactly the first positions of each stream
    assert web == _prefix(mixture, "web", 3 * 98 + 960)


def test_an_elastic_restore_into_another_schedule_takes_the_change_and_old_states_are_refused(two):
    """Every rank's states saved at step 7 under one schedule (code until 30), restored on 3 ranks x 1
    worker into the reverse one: the rest follows the new schedule from step 7 (web until 30, code
    after), each source reads exactly the first positions of its stream. States that do not name their
    weights (an older shardstream's) under another schedule are refused: their runs would be wrong."""
    before = ({"stages": [[0, 1], [30, 0]]}, {"stages": [[0, 0], [30, 1]]})
    after = (before[1], before[0])
    states, head = [], []
    for rank in range(2):
        loader = stateful(two_mixture(two, *before, rank=rank, world_size=2))
        taken, state = stopped(loader, 7)
        head += taken
        states.append(state)
    rests = []
    for rank in range(3):
        mixture = two_mixture(two, *after, rank=rank, world_size=3)
        mixture.load_state_dict(states)
        rests.append(list(stateful(mixture, workers=1)))
    assert [len(rest) for rest in rests] == [36] * 3
    for rest in rests:
        for t, batch in enumerate(rest):
            assert {source for source, _ in batch} == ({"web"} if 7 + t < 30 else {"code"}), t
    epoch0 = head + [b for rest in rests for b in rest]
    # code: 112 read before, then 3 x 98 (steps 30-42) of its unread 368 in stream order (the old workers
    # read inside their first windows, all below position 406, so this is the stream's first 406);
    # web: 3 x 184 (steps 7-29), its whole run and 72 past it.
    assert _reads(epoch0, "code") == _prefix(mixture, "code", 112 + 3 * 98)
    assert _reads(epoch0, "web") == _prefix(mixture, "web", 3 * 184)
    old_style = copy.deepcopy(states)
    for state in old_style:
        for snapshot in state["_snapshot"]["_worker_snapshots"].values():
            snapshot["dataset_state"].pop("weights", None)
    with pytest.raises(ValueError, match="another dataset"):
        two_mixture(two, *after, rank=0, world_size=2).load_state_dict(old_style)


def test_a_carried_epoch_restores_on_another_topology_and_the_carry_is_read_once(two):
    """After a change (1:1 to 1:3 at step 10), epoch 1 reads code's carry first; a checkpoint at its
    step 5, every rank's state gathered, continues on 1 rank x 3 workers, and epoch 2 goes on from there:
    over the four epochs each source reads exactly the first positions of its stream."""
    batches, states, mixtures = [], [], []
    for rank in range(2):
        head, rest, changed = _changed_at(two, (1, 1), (1, 3), 10, rank)
        batches += head + rest
        changed.set_epoch(1)
        loader = stateful(changed)
        taken, state = stopped(loader, 5)
        batches += taken
        states.append(state)
        mixtures.append(changed)
    restored = two_mixture(two, 1, 3, rank=0, world_size=1)
    restored.load_state_dict(states)
    rest = list(stateful(restored, workers=3))
    assert sum(map(len, rest)) == 2 * (STEPS - 5) * B  # the epoch's unread samples, all on one rank
    batches += rest
    for epoch in (2, 3):  # on the new topology: 960 samples an epoch on one rank
        restored.set_epoch(epoch)
        more = list(stateful(restored, workers=3))
        assert sum(map(len, more)) == 960
        batches += more
    assert _reads(batches, "code") == _prefix(restored, "code", 80 + 200 + 3 * 240)
    assert _reads(batches, "web") == _prefix(restored, "web", 80 + 600 + 3 * 720)


def test_weights_changed_with_an_elastic_restore_take_the_new_shares_and_read_each_stream_as_a_prefix(two):
    """1:1 on 2 ranks x 2 workers, every rank's states gathered at step 10, restored on 1 rank x 3
    workers into 1:3: the 800 samples left are read in the new shares (200 code), code's other 200 unread
    carried into epoch 1; over both epochs each source reads exactly the first positions of its stream."""
    states, batches = [], []
    for rank in range(2):
        loader = stateful(two_mixture(two, 1, 1, rank=rank, world_size=2))
        taken, state = stopped(loader, 10)
        batches += taken
        states.append(state)
    mixture = two_mixture(two, 1, 3, rank=0, world_size=1)
    mixture.load_state_dict(states)
    rest = list(stateful(mixture, workers=3))
    code = sum(1 for b in rest for s, _ in b if s == "code")
    assert sum(map(len, rest)) == 800 and abs(code - 200) <= 3  # each worker's budget rounded on its own
    mixture.set_epoch(1)
    batches += rest + list(stateful(mixture, workers=3))
    assert _reads(batches, "code") == _prefix(mixture, "code", 80 + code + 240)
    assert _reads(batches, "web") == _prefix(mixture, "web", 80 + 800 - code + 720)


def test_a_scheduled_restore_saved_before_reading_and_loaded_alone_carries_on_the_same(two):
    """A scheduled elastic restore's pending state, saved before its workers read anything and loaded on
    its own into a fresh mixture, reads the same restored epoch and the same next epoch."""
    before = ({"stages": [[0, 1], [30, 0]]}, {"stages": [[0, 0], [30, 1]]})
    states = []
    for rank in range(2):
        _, state = stopped(stateful(two_mixture(two, *before, rank=rank, world_size=2)), 7)
        states.append(state)
    runs = []
    for alone in (False, True):
        mixture = two_mixture(two, *before, rank=1, world_size=3)
        mixture.load_state_dict(states)
        if alone:
            pending = mixture.state_dict()
            mixture = two_mixture(two, *before, rank=1, world_size=3)
            mixture.load_state_dict(pending)
        first = list(stateful(mixture, workers=1))
        mixture.set_epoch(1)
        runs.append((first, list(stateful(mixture, workers=1))))
    assert runs[1] == runs[0]
