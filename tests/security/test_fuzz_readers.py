"""Seeded fuzzing of every tar reader (issue 32, acceptance 2): no hang, only StreamError-family errors, and
every sample handed out identical to a strict reading of the same bytes, with a fresh sidecar, without one,
and with a stale one (the original archive's, kept after the shard was replaced by a mutant).

Mutants of archives from our packer, webdataset's TarWriter, GNU tar (gnu and pax formats) and Python's
tarfile (``fuzzkit``): byte flips, truncations, 512-byte blocks inserted, deleted or repeated, header
fields rewritten with the checksum made valid again (sizes, names, type flags, ustar prefixes, pax
records), so most mutants get past the checksum. A failure names the base, the seed and the mutation;
``fuzzkit.mutate(base, headers, random.Random(seed))`` rebuilds it.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import shardstream.format.tarread as tarread
from shardstream.errors import StreamError
from shardstream.format import decode_offsets, offsets_name
from shardstream.format.scan import scan_file
from shardstream.indexer.run import IndexOptions, index_source
from streamer import ShardDataset, ShardMap
from tests.security.fuzzkit import Strict, base_archives, mutate, span_samples, strict_read

pytestmark = pytest.mark.timeout(60)  # a hang is the bug: fail, do not wait for CI's limit

SEED = 32
# 5 bases: 300 cases, each read by every reader (~10 s); SHARDSTREAM_FUZZ_MUTANTS=2000 for a longer hunt
MUTANTS_PER_BASE = int(os.environ.get("SHARDSTREAM_FUZZ_MUTANTS", "60"))
CASE_SECONDS = 5.0  # one case, all its readers: a hang fails the case that hangs, named
SHARD = "train-000000.tar"

Sample = tuple[str, tuple[tuple[str, bytes], ...]]


class Hang(Exception):
    """A case ran past CASE_SECONDS."""


@contextmanager
def _bounded(seconds: float):
    """SIGALRM after ``seconds``, the test's own timer (pytest-timeout's) put back as it was, less the time
    spent."""
    started = time.monotonic()

    def expired(signum, frame):
        raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))


def _normal(sample: dict[str, Any]) -> Sample:
    members = tuple(sorted((k, bytes(v)) for k, v in sample.items() if not k.startswith("__")))
    return sample["__key__"], members


def _strict_set(strict: Strict) -> Counter:
    return Counter(_normal({"__key__": key, **members}) for key, members in strict.samples)


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[tuple[str, str, bytes, bytes]]:
    """(base name, label, base bytes, mutant bytes): each base once unchanged, then its mutants."""
    bases = base_archives(tmp_path_factory.mktemp("bases"))
    out = []
    for name, base in bases.items():
        headers = strict_read(base).headers
        out.append((name, "unchanged", base, base))
        for j in range(MUTANTS_PER_BASE):
            seed = f"{SEED}-{name}-{j}"
            what, mutant = mutate(base, headers, random.Random(seed))
            out.append((name, f"seed {seed!r}: {what}", base, mutant))
    return out


def _read(reader: Callable[[], Iterable[dict[str, Any]]]) -> tuple[list[Sample], BaseException | None]:
    """What a reader hands out before it stops, and the error that stopped it (None at its end)."""
    got: list[Sample] = []
    try:
        for sample in reader():
            got.append(_normal(sample))
    except Hang:
        raise
    except BaseException as exc:  # which errors escape is what is tested
        return got, exc
    return got, None


def _judge(
    name: str,
    got: list[Sample],
    error: BaseException | None,
    strict: Strict,
    whole: bool,
    spans: list[tuple[str, dict[str, bytes]]] = (),
) -> list[str]:
    """Problems with one reader's result: an error outside the StreamError family, a sample the strict
    reading does not hold (or holds fewer times; ``spans``: also one of these), and with ``whole`` anything
    short of the full reading."""
    problems = []
    if error is not None and not isinstance(error, StreamError):
        problems.append(f"{name}: {type(error).__name__}: {str(error)[:160]}")
    allowed = _strict_set(strict)
    if strict.pending is not None:  # its members all read; only the next header is damaged (a sidecar's end)
        allowed[_normal({"__key__": strict.pending[0], **strict.pending[1]})] += 1
    allowed |= Counter(_normal({"__key__": key, **members}) for key, members in spans)
    wrong = Counter(got) - allowed
    for key, members in wrong:
        sizes = {ext: len(body) for ext, body in members}
        problems.append(f"{name}: handed out {key[:60]!r} {sizes} that the strict reading does not hold")
    if whole and (error is not None or Counter(got) != _strict_set(strict)):
        problems.append(f"{name}: {len(got)} of {len(strict.samples)} samples from a clean archive ({error})")
    return problems


def _front_to_back(data: bytes, python: bool) -> Callable[[], Iterable[dict[str, Any]]]:
    def read():
        import io

        saved = tarread._member_at
        if python:
            tarread._member_at = None
        try:
            yield from tarread.iter_samples(io.BytesIO(data), url=SHARD)
        finally:
            tarread._member_at = saved

    return read


def _scanned(path: Path, data: bytes, strict: Strict) -> list[str]:
    """The header walk behind `shardstream index`: its keys a subset of the strict reading's, each sample's
    span [offsets[i], offsets[i+1]) holding exactly that sample (what a sidecar made from it promises)."""
    scan = scan_file(path)
    spans = list(itertools.pairwise(scan.offsets))
    if len(spans) != len(scan.keys):
        return [f"scan: {len(scan.keys)} keys, {len(scan.offsets)} offsets"]
    got = [_normal({"__key__": scan.keys[i], **dict(_one(data[a:b]))}) for i, (a, b) in enumerate(spans)]
    problems = _judge("scan", got, None, strict, whole=False)
    if strict.error is None and scan.damage is None and len(got) != len(strict.samples):
        problems.append(f"scan: {len(got)} of {len(strict.samples)} samples, no damage reported")
    return problems


def _one(span: bytes) -> dict[str, bytes]:
    """The members of a span that must hold one sample; a span holding anything else reads as no members."""
    strict = strict_read(span)
    if strict.error is None and len(strict.samples) == 1:
        return strict.samples[0][1]
    return {"<span holds": f"{len(strict.samples)} samples, {strict.error}>".encode()}


def _indexed(index: Path, modes: Iterable[str]) -> dict[str, Callable[[], Iterable[dict[str, Any]]]]:
    """The readers that take an index and its sidecar: front to back with ends, deferred, zero-copy, the
    map; each with on_error raise, the dataset ones also with skip."""
    options = {
        "ends": {"shuffle": False},
        "deferred": {"shuffle": True, "seed": 1, "buffer_size": 4, "defer_reads": True},
        "zero_copy": {"shuffle": False, "zero_copy": True},
    }
    readers = {}
    for mode in modes:
        for on_error in ("raise", "skip"):
            kw = dict(options[mode], decode=False, on_error=on_error, keep_length=False)
            readers[f"{mode}/{on_error}"] = lambda kw=kw: ShardDataset(str(index), **kw)

    def mapped():
        samples = ShardMap(str(index), decode=False)
        for i in range(len(samples)):
            yield samples[i]

    readers["map"] = mapped
    return readers


def _index(folder: Path) -> int:
    """`shardstream index --partial` of the shard in ``folder``: the samples indexed (0: none readable)."""
    try:
        return index_source(str(folder), IndexOptions(partial=True)).samples
    except ValueError as exc:  # nothing to index is the one refusal; anything else is a finding
        if "no shard holds a readable sample" not in str(exc):
            raise
        return 0


def _run_case(readers: dict[str, Callable], strict: Strict, whole: bool, spans=()) -> list[str]:
    """Every reader's problems; ``spans`` (a sidecar's, each holding one sample) are allowed: a reader with
    a sidecar starts at its first span, jumps to any (deferred, the map) or past damage (on_error="skip")."""
    problems = []
    for name, reader in readers.items():
        got, error = _read(reader)
        problems += _judge(name, got, error, strict, whole, spans)
    return problems


def _sidecar_spans(
    folder: Path, data: bytes, strict: Strict, *, anywhere: bool = False
) -> list[tuple[str, dict[str, bytes]]]:
    offsets = list(decode_offsets((folder / offsets_name(SHARD)).read_bytes()))
    return span_samples(data, offsets, strict, anywhere=anywhere)


def test_every_reader_hands_out_only_what_a_strict_reading_holds(cases, tmp_path):
    """Without a sidecar (the fused reader, C and Python; the dataset) and with the mutant's own, made by
    `shardstream index --partial` (the header walk; the dataset front to back, deferred, zero-copy; the
    map)."""
    failures, refused = [], 0
    started = time.monotonic()
    for n, (name, label, _, data) in enumerate(cases):
        strict = strict_read(data)
        whole = label == "unchanged"
        plain, indexed = tmp_path / f"{n}-plain", tmp_path / f"{n}-indexed"
        plain.mkdir()
        indexed.mkdir()
        (plain / SHARD).write_bytes(data)
        (indexed / SHARD).write_bytes(data)
        readers = {
            "tarread/c": _front_to_back(data, python=False),
            "tarread/python": _front_to_back(data, python=True),
            "dataset/raise": lambda p=plain: ShardDataset([str(p / SHARD)], decode=False, shuffle=False),
            "dataset/skip": lambda p=plain: ShardDataset(
                [str(p / SHARD)], decode=False, shuffle=False, on_error="skip", keep_length=False
            ),
        }
        try:
            with _bounded(CASE_SECONDS):
                problems = _scanned(plain / SHARD, data, strict)
                problems += _run_case(readers, strict, whole)
                indexed_samples = _index(indexed)
                if indexed_samples:
                    modes = _indexed(indexed / "shardstream-index.json", ("ends", "deferred", "zero_copy"))
                    problems += _run_case(modes, strict, whole, _sidecar_spans(indexed, data, strict))
        except Hang as exc:
            problems, indexed_samples = [f"hang: {exc}"], 0
        refused += strict.error is None and not whole and indexed_samples < len(strict.samples)
        failures += [f"{name} {label}: {p}" for p in problems]
        shutil.rmtree(plain)
        shutil.rmtree(indexed)
    print(f"{len(cases)} cases in {time.monotonic() - started:.1f} s; {refused} clean mutants indexed short")
    _report(failures)


def _report(failures: list[str]) -> None:
    if failures:
        print("\n".join(failures))  # all of them, with -s
    assert not failures, "\n".join(failures[:40]) + f"\n({len(failures)} problems)"


@pytest.fixture(scope="module")
def originals(cases, tmp_path_factory) -> dict[str, Path]:
    """Each base archive indexed as written: the folder holding the shard, its sidecar, index and keys."""
    out = {}
    for name, _, base, _ in cases:
        if name not in out:
            folder = tmp_path_factory.mktemp(f"original-{name}")
            (folder / SHARD).write_bytes(base)
            index_source(str(folder), IndexOptions())
            out[name] = folder
    return out


def test_a_stale_sidecar_hands_out_only_what_the_new_bytes_hold(cases, originals, tmp_path):
    """The original archive's sidecar and index, kept after the shard was replaced by a mutant: every reader
    that trusts them must refuse (StreamError) or hand out only samples a strict reading of the new bytes
    holds (issue 32, item 5)."""
    failures = []
    for n, (name, label, _, data) in enumerate(cases):
        if label == "unchanged":
            continue
        strict = strict_read(data)
        folder = tmp_path / str(n)
        shutil.copytree(originals[name], folder)
        (folder / SHARD).write_bytes(data)
        readers = _indexed(folder / "shardstream-index.json", ("ends", "deferred", "zero_copy"))
        try:
            with _bounded(CASE_SECONDS):
                spans = _sidecar_spans(folder, data, strict, anywhere=True)
                problems = _run_case(readers, strict, False, spans)
        except Hang as exc:
            problems = [f"hang: {exc}"]
        failures += [f"{name} {label}: {p}" for p in problems]
        shutil.rmtree(folder)
    _report(failures)
