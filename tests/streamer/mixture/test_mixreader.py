"""A mixture's reader and pass streams on real shards: the planned order exactly, losses in a window, restores
at every position, open files bounded, one open per shard, and shard orders keyed as documented."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from shardstream.format import decode_offsets
from streamer.mixture.mixture import Mixture
from streamer.mixture.passes import PassStream, RunSegments, _pass_seed
from streamer.mixture.plan import Interleave
from streamer.mixture.stratify import Stratified
from tests.conftest import write_dataset

_OPENED: list[str] | None = None  # tar files opened while a test counts them (the audit hook below)


def _count_opens(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and str(args[0]).endswith(".tar"):
        _OPENED.append(str(args[0]))


sys.addaudithook(_count_opens)  # audit hooks cannot be removed; it only records while _OPENED is a list


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    root = tmp_path_factory.mktemp("five")
    return [write_dataset(root / f"d{j}", [30], prefix=f"d{j}").parent for j in range(5)]


def _keys(samples):
    return [(s["__source__"], s["__key__"]) for s in samples]


def _damage(root: Path, shard: str, sample: int) -> None:
    """Flip a byte of a sample's header, so its checksum no longer matches."""
    path = root / shard
    offsets = decode_offsets((root / f"{shard}.offsets").read_bytes())
    data = bytearray(path.read_bytes())
    data[offsets[sample] + 5] ^= 0x55
    path.write_bytes(bytes(data))


def test_sources_come_in_exactly_the_planned_order_interleaved_or_stratified(five):
    sources = [
        {"path": str(p), "weight": w, "decode": False} for p, w in zip(five, [1, 2, 3, 1, 5], strict=True)
    ]
    for stratify, order in ((None, Interleave), (8, Stratified)):
        mixture = Mixture(sources, epoch_size=120, buffer_size=16, stratify=stratify)
        budgets = mixture.plan(1, 1).budgets(0)
        planned = list(order(budgets)) if stratify is None else list(order(budgets, stratify))
        assert [s["__source__"] for s in mixture] == [mixture.names[j] for j in planned]


@pytest.mark.parametrize("defer_reads", [None, True], ids=["bytes", "ids"])
@pytest.mark.parametrize("decode", [False, True])
@pytest.mark.parametrize("window", [1, 7, 40])
def test_a_lost_sample_leaves_every_other_sample_where_it_was(tmp_path, window, decode, defer_reads):
    """Losses in the middle of a window, at its edges and in the next shard: the rest keeps its order,
    decoded or not, found as a window is read or (windows of ids) as each sample leaves it."""
    intact = write_dataset(tmp_path / "intact", [25, 25], prefix="hurt").parent
    hurt = tmp_path / "hurt"
    shutil.copytree(intact, hurt)
    for shard, sample in (
        ("hurt-000000.tar", 5),
        ("hurt-000000.tar", 6),
        ("hurt-000001.tar", 0),
        ("hurt-000001.tar", 24),
    ):
        _damage(hurt, shard, sample)
    other = write_dataset(tmp_path / "other", [9], prefix="other").parent

    def stream(path, **options):
        sources = [
            {"path": str(path), "name": "hurt", "repeat": 1, "decode": decode},
            {"path": str(other), "repeat": 2, "decode": decode},
        ]
        buffer = window * 68 // 50  # the hurt source's window is its share of the buffer
        return _keys(Mixture(sources, buffer_size=max(buffer, 1), seed=4, defer_reads=defer_reads, **options))

    full = stream(intact)
    lost = {("hurt", k) for k in ("s000-00005", "s000-00006", "s001-00000", "s001-00024")}
    mixture_keys = stream(hurt, on_error="skip", keep_length=False)
    assert mixture_keys == [k for k in full if k not in lost]


def test_an_undecodable_sample_is_skipped_counted_and_the_rest_decoded_in_order(tmp_path):
    from packer.sample import Sample
    from packer.shardwriter import TarShardWriter, encode_sample
    from shardstream.format import INDEX_NAME, DatasetIndex, shard_name, shard_pattern

    root = tmp_path / "labels"
    root.mkdir()
    writer = TarShardWriter(root / shard_name("labels", 0), max_size=None, max_count=None)
    for i in range(12):
        label = b"seven" if i == 4 else str(i).encode()  # "cls" decodes as an int
        chunks = encode_sample(Sample(f"k{i:02d}", f"k{i:02d}", (("cls", label),)))
        writer.add(f"k{i:02d}", chunks, sum(len(c) for c in chunks))
    DatasetIndex(shard_pattern("labels", 1), [writer.close()]).save(root / INDEX_NAME)
    sources = [{"path": str(root), "repeat": 1}]
    with pytest.raises(Exception, match="k04"):
        list(Mixture(sources, buffer_size=6))
    mixture = Mixture(sources, buffer_size=6, on_error="skip", keep_length=False)
    samples = list(mixture)
    assert sorted(s["cls"] for s in samples) == [i for i in range(12) if i != 4]
    assert mixture.errors["decode_errors"] == 1
    unshuffled = list(Mixture(sources, shuffle=False, on_error="skip", keep_length=False))
    assert [s["__key__"] for s in unshuffled] == [f"k{i:02d}" for i in range(12) if i != 4]


@pytest.mark.parametrize(
    ("options", "damaged", "decode"),
    [
        ({"stratify": 8}, False, True),
        ({"on_error": "skip"}, True, True),
        ({"on_error": "skip"}, True, False),
        ({"on_error": "skip", "buffer_size": 1}, True, False),
        ({"on_error": "skip", "defer_reads": True}, True, True),
    ],
    ids=["stratified", "stand-ins-decoded", "stand-ins-raw", "streamed-without-windows", "windows-of-ids"],
)
def test_a_mixture_restored_at_every_position_continues_exactly(tmp_path, options, damaged, decode):
    """Stratified: restores inside a batch. Stand-ins: restores while a repeat of a lost sample is owed; the
    repeat, read back by id, is decoded (or not) like the sample it stands in for."""
    hurt = write_dataset(tmp_path / "a", [20, 14], prefix="a").parent
    if damaged:
        _damage(hurt, "a-000000.tar", 3)
        _damage(hurt, "a-000001.tar", 13)  # the shard's last sample: the repeat comes from before it
    other = write_dataset(tmp_path / "b", [11], prefix="b").parent
    sources = [
        {"path": str(hurt), "repeat": 1, "decode": decode},
        {"path": str(other), "weight": 1, "decode": decode},
    ]

    def mixture():
        return Mixture(sources, epoch_size=60, seed=2, **{"buffer_size": 8, **options})

    def _keys(samples):
        return [(s["__source__"], s["__key__"], s["cls"]) for s in samples]

    uninterrupted = mixture()
    full = _keys(uninterrupted)
    assert len(full) == 60
    errors = uninterrupted.errors
    assert errors["samples_skipped"] == errors["samples_repeated"] == (2 if damaged else 0)
    for stop in range(len(full)):
        head_mixture = mixture()
        stream = iter(head_mixture)
        head = _keys(next(stream) for _ in range(stop))
        restored = mixture()
        restored.load_state_dict(head_mixture.state_dict())
        assert head + _keys(restored) == full, f"restored after {stop} samples"
        for counter in ("samples_skipped", "samples_repeated"):  # a window read again is not counted again
            assert head_mixture.errors[counter] + restored.errors[counter] == errors[counter], (stop, counter)


def _open_tars(root: Path) -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for fd in os.listdir(fds):
        try:
            target = os.readlink(fds / fd)
        except OSError:
            continue
        count += target.startswith(str(root)) and target.endswith(".tar")
    return count


def test_a_buffer_too_small_for_a_window_reads_each_source_in_its_pass_order(five):
    """A source's window is its share of buffer_size, at least one sample: then it is not shuffled."""
    sources = [{"path": str(p), "weight": 1, "decode": False} for p in five[:2]]
    mixture = Mixture(sources, epoch_size=40, buffer_size=1, seed=3)
    read = [(s["__source__"], s["__key__"]) for s in mixture]
    for j, name in enumerate(mixture.names):
        stream = PassStream(mixture.shard_lists[j].counts, seed=3, salt=name)
        in_pass_order = [f"s000-{i:05d}" for g in stream.segments(0, 20) for i in range(g.start, g.stop)]
        assert [key for source, key in read if source == name] == in_pass_order


@pytest.mark.parametrize("defer_reads", [None, True], ids=["bytes", "ids"])
def test_at_most_max_open_sources_hold_a_file_open(five, defer_reads):
    """Windows of bytes: a reader per source; windows of ids: the shards their reads keep open."""
    sources = [{"path": str(p), "weight": 1, "decode": False} for p in five]
    root = five[0].parent
    for max_open, most in ((2, 2), (32, 5)):
        peak = 0
        for _ in Mixture(sources, epoch_size=150, buffer_size=10, max_open=max_open, defer_reads=defer_reads):
            peak = max(peak, _open_tars(root))
        assert peak == most, (max_open, peak)


def test_sources_streamed_without_windows_reopen_where_they_stood_when_closed_for_others(five):
    """A window of one sample streams the run; closed to keep max_open, a source reopens where it stood."""
    sources = [{"path": str(p), "weight": 1, "decode": False} for p in five]
    root = five[0].parent
    runs = {}
    for max_open in (1, 2, 32):
        peak, keys = 0, []
        for sample in Mixture(sources, epoch_size=150, buffer_size=1, max_open=max_open):
            peak = max(peak, _open_tars(root))
            keys.append((sample["__source__"], sample["__key__"]))
        assert peak == min(max_open, 5)
        runs[max_open] = keys
    assert runs[1] == runs[2] == runs[32] and len(set(runs[32])) == 150


@pytest.mark.parametrize("buffer_size", [1, 40])
@pytest.mark.parametrize("damaged", [False, True])
def test_a_small_source_is_held_after_its_first_pass_not_reopened_every_pass(
    tmp_path, monkeypatch, buffer_size, damaged
):
    """The same samples in the same order as reading it again each pass; a source that lost a sample is
    not held (its losses are counted each pass, as when it is read again)."""
    global _OPENED
    tiny = write_dataset(tmp_path / "tiny", [7], prefix="tiny").parent
    if damaged:
        _damage(tiny, "tiny-000000.tar", 2)
    big = write_dataset(tmp_path / "big", [300, 300], prefix="big").parent
    sources = [{"path": str(p), "weight": w, "decode": False} for p, w in ((tiny, 0.3), (big, 0.7))]

    def run():
        mixture = Mixture(sources, epoch_size=1000, buffer_size=buffer_size, seed=5, on_error="skip")
        return _keys(mixture), mixture.errors

    _OPENED = []
    try:
        held, held_errors = run()
        opened = [Path(p).name for p in _OPENED]
    finally:
        _OPENED = None
    monkeypatch.setattr("streamer.mixture.windows.HOLD_SAMPLES", 0)
    assert (held, held_errors) == run()
    passes = sum(source == "tiny" for source, _ in held) // 7
    assert passes > 30
    opens = opened.count("tiny-000000.tar")
    assert opens == 1 if not damaged else opens >= passes  # once; or again each pass (and after each loss)


def test_a_source_read_window_after_window_opens_each_shard_once(tmp_path):
    global _OPENED
    a = write_dataset(tmp_path / "a", [30, 30], prefix="a").parent
    b = write_dataset(tmp_path / "b", [60], prefix="b").parent
    sources = [{"path": str(a), "repeat": 1, "decode": False}, {"path": str(b), "repeat": 1, "decode": False}]
    _OPENED = []
    try:
        assert len(list(Mixture(sources, buffer_size=12))) == 120
        opened = sorted(Path(p).name for p in _OPENED)
    finally:
        _OPENED = None
    assert opened == ["a-000000.tar", "a-000001.tar", "b-000000.tar"]


# -- pass streams --------------------------------------------------------------------------------------


def _shards(stream: PassStream, number: int) -> list[int]:
    return [seg.shard for seg in stream.segments(number * stream.size, (number + 1) * stream.size)]


def test_shard_orders_are_pinned_and_keyed_by_seed_name_and_pass():
    """Pinned like placement's draws: a change here would make saved mixture states mean other samples."""
    counts = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    stream = PassStream(counts, seed=7, salt="coco")
    assert _pass_seed(7, "coco") == 565832743438828114 and _pass_seed(0, "src") == 18372705827597508418
    assert [_shards(stream, p) for p in range(3)] == [
        [0, 7, 1, 2, 5, 6, 3, 4],
        [3, 6, 7, 5, 1, 0, 2, 4],
        [7, 0, 3, 1, 5, 2, 6, 4],
    ]
    assert stream.window_order(40, 52) == [0, 2, 5, 11, 6, 9, 4, 8, 1, 3, 10, 7]
    assert stream.window_order(0, 12) == [5, 10, 3, 2, 8, 6, 11, 9, 7, 4, 1, 0]
    others = [PassStream(counts, seed=8, salt="coco"), PassStream(counts, seed=7, salt="ocr")]
    assert all(_shards(o, 0) != _shards(stream, 0) for o in others)
    assert all(o.window_order(0, 12) != stream.window_order(0, 12) for o in others)
    plain = PassStream(counts, seed=7, salt="coco", shuffle=False)
    assert _shards(plain, 0) == _shards(plain, 1) == list(range(8))
    assert plain.window_order(40, 52) == list(range(12))
    assert PassStream(counts, seed=7, salt="coco").shuffle  # shuffling is the default


def test_a_pass_stream_offsets_its_shards_by_its_base_and_needs_one_sample():
    counts = np.array([2, 3])
    assert [s.shard for s in PassStream(counts, seed=1, salt="x", shuffle=False).segments(0, 5)] == [0, 1]
    based = PassStream(counts, seed=1, salt="x", shuffle=False, base=10)
    assert [(s.shard, s.start, s.stop) for s in based.segments(0, 5)] == [(10, 0, 2), (11, 0, 3)]
    assert PassStream(np.array([1]), seed=0, salt="one").size == 1
    with pytest.raises(ValueError, match="empty: a pass stream needs at least one sample"):
        PassStream(np.array([0, 0]), seed=0, salt="empty")


def test_run_segments_answer_any_index_a_reader_asks_for_over_many_shards():
    """A reader walks forward, looks back one segment and may start over; far more than 64 segments."""
    stream = PassStream(np.array([1, 2, 3] * 60), seed=3, salt="many")
    begin, end = 5, stream.size * 2 + 7
    expected = list(stream.segments(begin, end))
    run = RunSegments(stream, begin, end)
    for k in [*range(0, 150), 149, 148, *range(150, len(expected)), 0, 1, 2, 100]:
        assert run[k] == expected[k], k
    with pytest.raises(IndexError):
        run[len(expected)]


def test_window_orders_are_pinned_and_the_same_made_one_by_one_or_in_rows(monkeypatch):
    """Pinned: a saved state's counts mean these samples. Ordered a row per window in one numpy call or
    each alone, every window, short ones at a pass's or run's end included, comes out the same."""
    counts = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    stream = PassStream(counts, seed=7, salt="coco")
    assert stream.window_order(0, 10) == [5, 3, 2, 8, 6, 9, 7, 4, 1, 0]
    assert stream.window_order(10, 17) == [3, 0, 1, 4, 2, 5, 6]
    for width in (1, 2, 7, 31, 100):
        windows = [(lo, min(lo + width, 31 * (lo // 31 + 1), 150)) for lo in range(0, 150, width)]
        in_rows = [PassStream(counts, seed=7, salt="coco").window_order(lo, hi) for lo, hi in windows]
        monkeypatch.setattr("streamer.mixture.passes.ORDER_BATCH", 1)
        alone = [PassStream(counts, seed=7, salt="coco").window_order(lo, hi) for lo, hi in windows]
        monkeypatch.undo()
        assert in_rows == alone, width
        reused = PassStream(counts, seed=7, salt="coco")
        assert [reused.window_order(lo, hi) for lo, hi in windows] == alone, width


def test_a_pass_stream_finds_the_sample_at_any_position_in_any_order():
    stream = PassStream(np.array([3, 1, 4, 1, 5, 9, 2, 6]), seed=7, salt="coco", base=10)
    ids = [(s.shard, i) for s in stream.segments(0, 93) for i in range(s.start, s.stop)]
    order = list(range(93))
    np.random.default_rng(0).shuffle(order)
    assert [stream.at(x) for x in order] == [ids[x] for x in order]
    assert [stream.at(x) for x in range(93)] == ids
