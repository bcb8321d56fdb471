#!/usr/bin/env python3
"""Raw-read peers (issue 15): our ``ShardDataset`` against LitData and MosaicML streaming (MDS), same data.

Data: ``--samples`` (10,000) 256x256 JPEGs of varied content (a random gradient, blotches and noise of a
random strength, quality 90: ~35 KB on average) and an int label each, written once as ``KEY.jpg`` +
``KEY.cls`` and then in each format, about 10 shards or chunks each, under ``--workdir`` (reused on
later runs while the sample count, the generator and the library versions are the same):

* ours     ``packer.pack(src, out, PackOptions(max_size=None, max_count=samples / 10))``, read with
           ``streamer.ShardDataset(out / "shardstream-index.json", shuffle=True, ...)``;
* LitData  ``litdata.optimize(fn, keys, out, chunk_size=samples / 10, num_workers=1)`` with ``fn`` returning
           ``{"jpg": bytes, "cls": int}``, read with ``litdata.StreamingDataset(out, shuffle=True)``;
* MDS      ``streaming.MDSWriter(columns={"jpg": "bytes", "cls": "int"}, size_limit=~1/10 of the data)``,
           read with ``streaming.StreamingDataset(local=out, remote=None, shuffle=True, batch_size=64)``
           (MDS refuses to shuffle without ``batch_size``, even in one process).

Each library shuffles its own way, at its defaults: ours through a 1000-sample buffer (filled before the
first sample), LitData chunks in random order and items within a chunk in windows of 256, MDS ``py1e``.

What is measured, every contender reading the whole epoch, each sample's image and label touched (the
image's ``len()`` and first byte, ``int()`` of the label; the parent checks the counts, byte totals and
label sum against the source, so a reader that drops, repeats or mangles samples is flagged):

1. ``raw``     one process, shuffle on: ours ``decode=False`` (bytes), ours ``zero_copy=True`` (read-only
               memoryviews into the mapped shard; "n/a" when this ShardDataset has no such parameter),
               LitData as it hands items out (the table says what type) and with each image copied to
               ``bytes``, MDS.
2. ``loader``  the same through ``torch.utils.data.DataLoader(ds, batch_size=64, num_workers=2)`` with a
               collate that keeps the batch a list; ours also with ``collate_fn=streamer.raw_collate``, with
               ``decode=False`` and with ``zero_copy=True`` (when they exist; the ``RawBatch`` iterated in
               the main process); LitData and MDS also through their own ``StreamingDataLoader``, and
               LitData also with a collate that copies its memoryviews to ``bytes`` in the worker: its
               memoryviews cannot be pickled, the worker's queue feeder thread only prints the TypeError
               and the main process waits for that batch forever. A run that does not finish in
               ``--timeout`` seconds (120) is killed with its process group and reported as "hangs", with
               the exception lines it printed and where the main thread waited (faulthandler dumps the
               stacks ten seconds before the kill); a contender that hangs or fails is not run again.
3. ``decode``  JPEGs to uint8 CHW tensors: bare torchcodec ``decode_jpeg(bytes, mode="RGB")`` (what the
               streamer's ``image="torch"`` calls, ``decode/image.py``) over bytes already in memory, vs
               ``ShardDataset(index, shuffle=True, image="torch")`` in process and through the DataLoader
               (2 workers, batch 64, ``streamer.batch.collate`` stacking the images); the DataLoader row is
               compared with bare torchcodec in the same DataLoader (each worker decoding its share of
               the bytes in memory, inherited by fork; batches stacked the same way).

Baseline: ``--baseline REV`` (default ``88c9917~1``, the code the issue was filed against) adds our code at
that commit to the raw and loader sections (``decode=False``; list collate), its sources taken with ``git
archive`` and its C extensions built in place; the report gives today's rows as multiples of it, so "3x the
DataLoader figure of the day the issue was filed" is read within one run, whatever this machine's speed.

Method, as in ``stream_bench.py``: every run is a fresh subprocess of the contender's own interpreter,
timed from inside after its imports (torch and the library), dataset construction included; contenders take
turns round by round (A B C, A B C, ...), best of ``--repeats`` (3) rounds. "first sample" is the time from
the start of the dataset's construction to the first sample (or batch) in hand, the least over the rounds.
The page cache is warmed once, by reading every file of the three formats, before the first round. Ours
is imported from a copy of ``shardstream/``, ``packer/`` and ``streamer/`` taken when the run starts, so
edits landing in the working tree mid-run cannot mix versions; the features probed (``zero_copy``,
``raw_collate``) are those of that copy.

The peers run in their own venvs, each with its own torch (from PyPI: CUDA wheels, ~6 GB a venv)::

    python3.11 -m venv /work/venvs/litdata && /work/venvs/litdata/bin/pip install litdata
    python3.11 -m venv /work/venvs/mds && /work/venvs/mds/bin/pip install mosaicml-streaming

``--setup`` does exactly that for the ones missing (~4 minutes for both here), then exits. Then::

    .venv/bin/python benchmarks/stream/raw_peers_bench.py --setup          # the peers' venvs, once
    .venv/bin/python benchmarks/stream/raw_peers_bench.py --quick          # 2,000 samples, 1 round, not saved
    .venv/bin/python benchmarks/stream/raw_peers_bench.py                  # the full run
    .venv/bin/python benchmarks/stream/raw_peers_bench.py --only raw --repeats 5 --no-save

On 2 cores: the full run takes ~8 minutes, 4 of them the two LitData loaders that hang (``--timeout 30``
shortens that), plus ~2 minutes the first time to make the data (1.4 GB in ``/tmp/rawpeers``); ``--quick``
~5 minutes, the same 4 included. The machine is shared: compare the ratios within one run, and look at
the load average printed under each table.

Results: a markdown report on stdout, plus ``benchmarks/results/raw-peers-<date>.{md,json}`` (not for
``--quick``, nor with ``--no-save``). The child side is ``raw_peers_children.py``.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import io
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import REPO, RESULTS, SOURCE_PACKAGES, warm_read
from harness.cli import command_line, log
from harness.report import machine_facts, machine_lines, marker_matches, save_results, table, write_marker
from harness.sources import check_sources, note_source_drift, snapshot_sources, source_fingerprint

CHILD = Path(__file__).resolve().with_name("raw_peers_children.py")
OURS_PY = sys.executable
VENVS = {"litdata": Path("/work/venvs/litdata"), "mds": Path("/work/venvs/mds")}
PIP_NAME = {"litdata": "litdata", "mds": "mosaicml-streaming"}
LABEL = {"ours": "ours", "litdata": "LitData", "mds": "MDS"}
VERSIONS = {
    "ours": ("torch", "torchcodec", "pillow", "numpy"),
    "litdata": ("litdata", "torch", "numpy"),
    "mds": ("mosaicml-streaming", "torch", "numpy"),
}
SECTIONS = ("raw", "loader", "decode")
WORKERS = 2
BATCH = 64
SIDE = 256
QUALITY = 90
GENERATOR = 1  # bump when the images change, so data made before is rebuilt
MIB = 2**20

# Where ours is imported from: a copy of the sources taken when the run starts (snapshot_sources).
SRC = REPO
# The code the issue's figures were measured on (the commit before zero_copy and raw_collate landed): run
# beside today's so "3x today's DataLoader figure" is a ratio within one run, not against a past machine.
ISSUE_BASELINE = "88c9917~1"


# ---------------------------------------------------------------------------------------------------------
# Running children, each in its own interpreter, killed with its process group when it hangs.
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    status: str  # ok, hangs, error, wrong
    wall: float
    result: dict[str, Any] = field(default_factory=dict)
    detail: str = ""  # the error's last lines, or the stacks dumped before a hang


def python_of(lib: str) -> str:
    return OURS_PY if lib == "ours" else str(VENVS[lib] / "bin" / "python")


def child_env(lib: str, src: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONHASHSEED"] = "0"
    if lib == "ours":
        env["PYTHONPATH"] = str(src or SRC)
    env["LITDATA_DISABLE_VERSION_CHECK"] = "1"  # else its StreamingDataset may ask PyPI, inside the timing
    return env


def run_child(
    lib: str, kind: str, spec: dict[str, Any], timeout: float | None = None, src: Path | None = None
) -> Outcome:
    """Run ``raw_peers_children.py KIND SPEC`` with ``lib``'s interpreter (ours imported from ``src``, else
    the run's snapshot); kill its group on timeout."""
    cmd = [python_of(lib), str(CHILD), kind, json.dumps(spec)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, cwd=REPO, env=child_env(lib, src), start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
        wall = time.perf_counter() - started
        with_group_gone(proc)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if hung:
        detail = f"killed after {timeout:.0f} s; stderr:\n{stderr[:3000]}\n...\n{stderr[-6000:]}"
        return Outcome("hangs", wall, {"evidence": hang_evidence(stderr)}, detail=detail)
    if code != 0:
        return Outcome("error", wall, detail=f"exit {code}:\n{stderr[-3000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    if lib == "ours":
        check_sources(kind, result.get("source_files", {}), src or SRC)
    return Outcome("ok", wall, result)


def hang_evidence(stderr: str) -> str:
    """What a hung run printed: its distinct exception lines (with the outermost and innermost frames of
    their traceback, and how many times), and where the main thread waited when the stacks were dumped
    (faulthandler, a little before the kill)."""
    frame = re.compile(r'File "(?:[^"]*/)?([^"/]+)", line (\d+),? in (\S+)')
    counts: dict[str, int] = {}
    frames: list[str] = []
    for line in stderr.splitlines():
        if line.startswith("Traceback"):
            frames = []
        found = frame.search(line)
        if found:
            frames.append(f"{found.group(1)}:{found.group(2)} {found.group(3)}")
        error = re.match(r"^(\w+(?:Error|Exception)\b.*)$", line)
        if error:
            at = f" (in {frames[0]} -> {frames[-1]})" if frames else ""
            key = error.group(1) + at
            counts[key] = counts.get(key, 0) + 1
    parts = [f"{text}, {n}x" for text, n in list(counts.items())[:3]]
    for block in re.split(r"\n(?=(?:Current )?[Tt]hread 0x)", stderr):
        if "<module>" in block:
            library = [line for line in block.splitlines() if "site-packages/" in line]
            waiting = (
                re.search(r'site-packages/([^"]+)", line (\d+) in (\S+)', library[0]) if library else None
            )
            if waiting:
                parts.append("main thread waiting in {}:{} {}".format(*waiting.groups()))
            break
    return "; ".join(parts) or "no output"


def with_group_gone(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL whatever is left of the child's process group (DataLoader workers of a hung run)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# ---------------------------------------------------------------------------------------------------------
# Setup: the peers' venvs.
# ---------------------------------------------------------------------------------------------------------
def setup_venvs() -> dict[str, float]:
    """``python3.11 -m venv`` + ``pip install`` for each peer whose venv is missing; seconds each took."""
    took = {}
    base = shutil.which("python3.11") or sys.executable
    for lib, venv in VENVS.items():
        if (venv / "bin" / "python").exists():
            log(f"{venv}: already there")
            continue
        log(f"{venv}: python3.11 -m venv, pip install {PIP_NAME[lib]} (pulls torch) ...")
        started = time.perf_counter()
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--quiet", PIP_NAME[lib]]
        subprocess.run(pip, check=True)
        took[lib] = time.perf_counter() - started
        log(f"  done in {took[lib]:.0f} s")
    return took


def check_venvs() -> None:
    missing = [str(venv) for venv in VENVS.values() if not (venv / "bin" / "python").exists()]
    if missing:
        raise SystemExit(
            f"missing peer venv(s): {', '.join(missing)}; make them with "
            "`.venv/bin/python benchmarks/stream/raw_peers_bench.py --setup`"
        )


def versions() -> dict[str, dict[str, str]]:
    out = {}
    for lib, names in VERSIONS.items():
        got = run_child(lib, "versions", {"names": list(names)}, timeout=120)
        out[lib] = got.result if got.status == "ok" else {"error": got.detail[-300:]}
        out[lib].pop("source_files", None)
        out[lib].pop("vmhwm", None)
    return out


# ---------------------------------------------------------------------------------------------------------
# The baseline: our code at an older commit, measured beside today's.
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Baseline:
    rev: str  # as asked for (ISSUE_BASELINE by default)
    commit: str  # the full hash it names
    src: Path  # its SOURCE_PACKAGES, C extensions built in place

    @property
    def label(self) -> str:
        return f"ours@{self.commit[:7]}"


BASELINE_ROW = {"raw": "decode=False", "loader": "list collate"}  # the rows the issue's figures came from


def make_baseline(rev: str, work: Path) -> Baseline:
    """``git archive`` of ``rev``'s sources into ``work/baseline-HASH`` with its optional C extensions built
    in place (``build_ext --inplace``, as ``pip install -e`` builds them); kept for later runs."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if commit.returncode != 0:
        raise SystemExit(f"--baseline {rev!r}: not a commit here ({commit.stderr.strip()})")
    sha = commit.stdout.strip()
    dest = work / f"baseline-{sha[:12]}"
    done = dest / ".built"
    if not done.exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        log(f"baseline {rev} = {sha[:12]}: its sources into {dest}, C extensions built ...")
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", sha, "pyproject.toml", *SOURCE_PACKAGES],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        subprocess.run(
            [OURS_PY, "-c", "from setuptools import setup; setup()", "build_ext", "--inplace", "-q"],
            cwd=dest,
            check=True,
            capture_output=True,
        )
        compileall.compile_dir(dest, quiet=1)
        done.write_text(sha + "\n")
    return Baseline(rev, sha, dest)


# ---------------------------------------------------------------------------------------------------------
# Data: the JPEG folder, then each format.
# ---------------------------------------------------------------------------------------------------------
def make_image(index: int, seed: int) -> bytes:
    """A 256x256 JPEG: a random gradient per channel, 8x8-pixel blotches, noise of a random strength."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng([seed, index])
    yy, xx = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32)
    a, b, c = rng.uniform(-1, 1, 3)
    base = np.stack([(xx * a + yy * b) % 256, (xx * b - yy * c) % 256, ((xx + yy) * c * 0.5 + 128) % 256], -1)
    blotches = np.kron(rng.normal(0, 30, (SIDE // 8, SIDE // 8, 3)), np.ones((8, 8, 1)))
    noise = rng.normal(0, rng.uniform(8, 32), (SIDE, SIDE, 3))
    pixels = np.clip(base + blotches + noise, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=QUALITY)
    return out.getvalue()


def make_source(root: Path, samples: int, seed: int) -> dict[str, Any]:
    """``root/src``: ``KEY.jpg`` + ``KEY.cls`` (a label 0-999) per sample; reused when its marker matches."""
    import numpy as np

    params = {"samples": samples, "seed": seed, "side": SIDE, "quality": QUALITY, "generator": GENERATOR}
    src = root / "src"
    facts_file = root / "src-facts.json"
    if marker_matches(root, params) and facts_file.exists():
        return dict(json.loads(facts_file.read_text()))
    shutil.rmtree(root, ignore_errors=True)
    src.mkdir(parents=True)
    log(f"making {samples:,} {SIDE}x{SIDE} JPEGs in {src} ...")
    started = time.perf_counter()
    labels = np.random.default_rng([seed, 1 << 30]).integers(0, 1000, samples)
    total = 0
    for i in range(samples):
        data = make_image(i, seed)
        total += len(data)
        (src / f"{i:06d}.jpg").write_bytes(data)
        (src / f"{i:06d}.cls").write_text(f"{labels[i]}\n")
    facts = {
        "samples": samples,
        "jpeg_bytes": total,
        "mean_jpeg_bytes": round(total / samples),
        "label_sum": int(labels.sum()),
        "seconds": round(time.perf_counter() - started, 1),
    }
    facts_file.write_text(json.dumps(facts))
    write_marker(root, params)
    log(f"  {total / 1e6:.0f} MB, {total / samples / 1e3:.1f} KB a JPEG on average, {facts['seconds']} s")
    return facts


def make_formats(root: Path, lib_versions: dict[str, dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Each format written once from ``root/src`` (a child of its own interpreter); reused while the
    source and the writing library's version are the same."""
    writers = {"ours": "write-ours", "litdata": "write-litdata", "mds": "write-mds"}
    made = {}
    src_marker = json.loads((root / ".bench-params.json").read_text())
    for lib, kind in writers.items():
        out = root / lib
        params = {"source": src_marker, "versions": lib_versions[lib]}
        facts_file = root / f"{lib}-facts.json"
        if marker_matches(out, params) and facts_file.exists():
            made[lib] = json.loads(facts_file.read_text())
            continue
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        target = out / "data"
        log(f"writing the {LABEL[lib]} format ...")
        got = run_child(
            lib, kind, {"src": str(root / "src"), "out": str(target), "samples": src_marker["samples"]}
        )
        if got.status != "ok":
            raise SystemExit(f"writing {LABEL[lib]} failed: {got.detail}")
        facts = {k: got.result[k] for k in ("seconds", "shards", "bytes", "files")}
        facts["path"] = str(target / "shardstream-index.json") if lib == "ours" else str(target)
        facts["wall"] = round(got.wall, 2)
        log(f"  {facts['shards']} shards, {facts['bytes'] / 1e6:.0f} MB, {facts['seconds']:.1f} s")
        facts_file.write_text(json.dumps(facts))
        write_marker(out, params)
        made[lib] = facts
    return made


# ---------------------------------------------------------------------------------------------------------
# The contenders.
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Contender:
    name: str
    lib: str
    spec: dict[str, Any]
    kind: str = "read"
    unavailable: str | None = None  # why this contender cannot run here ("n/a" in the table)
    src: Path | None = None  # ours imported from here (the baseline's sources), else the run's snapshot
    runs: list[Outcome] = field(default_factory=list)


def _read(name: str, lib: str, formats: dict[str, Any], **spec: Any) -> Contender:
    return Contender(name, lib, {"lib": lib, "path": formats[lib]["path"], **spec})


def contenders_for(
    section: str, formats: dict[str, Any], probe: dict[str, Any], baseline: Baseline | None = None
) -> list[Contender]:
    contenders = _contenders_for(section, formats, probe)
    if baseline is not None and section in BASELINE_ROW:
        row = _read(f"{baseline.label}, {BASELINE_ROW[section]}", "ours", formats, options={"decode": False})
        if section == "loader":
            row.spec["workers"] = WORKERS
        row.src = baseline.src
        contenders.insert(0, row)
    return contenders


def _contenders_for(section: str, formats: dict[str, Any], probe: dict[str, Any]) -> list[Contender]:
    no_zero_copy = None if probe["zero_copy"] else "ShardDataset has no zero_copy parameter"
    no_raw_collate = None if probe["raw_collate"] else "streamer has no raw_collate"
    raw = {"decode": False}
    dl = {"workers": WORKERS}
    if section == "raw":
        zero = _read("ours, zero_copy=True", "ours", formats, options={**raw, "zero_copy": True})
        zero.unavailable = no_zero_copy
        return [
            _read("ours, decode=False", "ours", formats, options=raw),
            zero,
            _read("LitData, as handed out", "litdata", formats),
            _read("LitData, image copied to bytes", "litdata", formats, copy=True),
            _read("MDS", "mds", formats),
        ]
    if section == "loader":
        zero = {**raw, "zero_copy": True}
        collated = _read("ours, raw_collate", "ours", formats, options=raw, collate="raw_collate", **dl)
        collated.unavailable = no_raw_collate
        zero_collated = _read(
            "ours, zero_copy=True, raw_collate", "ours", formats, options=zero, collate="raw_collate", **dl
        )
        zero_collated.unavailable = no_raw_collate or no_zero_copy
        litdata = {"loader": "litdata"}
        return [
            _read("ours, list collate", "ours", formats, options=raw, **dl),
            collated,
            zero_collated,
            _read("LitData, torch DataLoader, list collate", "litdata", formats, **dl),
            _read("LitData, StreamingDataLoader, list collate", "litdata", formats, **litdata, **dl),
            _read(
                "LitData, torch DataLoader, collate copying to bytes",
                "litdata",
                formats,
                collate="bytes",
                **dl,
            ),
            _read(
                "LitData, StreamingDataLoader, collate copying to bytes",
                "litdata",
                formats,
                collate="bytes",
                **litdata,
                **dl,
            ),
            _read("MDS, torch DataLoader, list collate", "mds", formats, **dl),
            _read("MDS, StreamingDataLoader, list collate", "mds", formats, loader="mds", **dl),
        ]
    if section == "decode":
        torch_images = {"image": "torch"}
        return [
            Contender(
                "bare torchcodec decode_jpeg, bytes in memory",
                "ours",
                {"index": formats["ours"]["path"]},
                kind="bare",
            ),
            _read('ours, image="torch"', "ours", formats, options=torch_images, decoded=True),
            Contender(
                BARE_LOADER,
                "ours",
                {"index": formats["ours"]["path"], **dl},
                kind="bare",
            ),
            _read(
                'ours, image="torch", DataLoader, streamer.batch.collate',
                "ours",
                formats,
                options=torch_images,
                decoded=True,
                collate="stack",
                **dl,
            ),
        ]
    raise ValueError(section)


def check_outcome(outcome: Outcome, spec: dict[str, Any], source: dict[str, Any]) -> None:
    """Mark a run ``wrong`` when what it touched is not exactly the source's samples."""
    if outcome.status != "ok":
        return
    got, n = outcome.result, source["samples"]
    decoded = spec.get("decoded") or "index" in spec
    want_bytes = n * 3 * SIDE * SIDE if decoded else source["jpeg_bytes"]
    problems = []
    if got["samples"] != n:
        problems.append(f"{got['samples']:,} samples, not {n:,}")
    if got["image_bytes"] != want_bytes:
        problems.append(f"{got['image_bytes']:,} image bytes, not {want_bytes:,}")
    if got["jpeg_heads"] != got["samples"]:
        problems.append(f"{got['samples'] - got['jpeg_heads']} images not JPEG (or not 3-channel)")
    if got["label_sum"] != source["label_sum"]:
        problems.append(f"label sum {got['label_sum']}, not {source['label_sum']}")
    if problems:
        outcome.status = "wrong"
        outcome.detail = "; ".join(problems)


def describe(outcome: Outcome) -> str:
    if outcome.status == "hangs":
        return f"HANGS, killed after {outcome.wall:.1f} s wall: {outcome.result['evidence']}"
    if outcome.status == "error":
        return f"ERROR after {outcome.wall:.1f} s wall: {outcome.detail.strip()[-400:]}"
    got = outcome.result
    text = (
        f"{got['seconds']:.2f} s (wall {outcome.wall:.1f} s), {got['samples']:,} samples, "
        f"{got['samples'] / got['seconds']:,.0f}/s, first {1000 * (got['first_seconds'] or 0):.0f} ms, "
        f"{got['item_type']}, VmHWM {got['vmhwm'] / MIB:.0f} MiB, load {os.getloadavg()[0]:.1f}"
    )
    return text + (f"  WRONG: {outcome.detail}" if outcome.status == "wrong" else "")


def run_rounds(
    section: str, contenders: list[Contender], repeats: int, timeout: float, source: dict[str, Any]
) -> None:
    """Every available contender once per round, in turn; one that hangs or fails is not run again."""
    for r in range(repeats):
        for c in contenders:
            if c.unavailable or any(o.status in ("hangs", "error") for o in c.runs):
                continue
            spec = dict(c.spec)
            if c.kind == "read":
                spec["dump_after"] = max(1.0, timeout - 10)
            outcome = run_child(c.lib, c.kind, spec, timeout=timeout, src=c.src)
            check_outcome(outcome, c.spec, source)
            outcome.result["load_1min"] = round(os.getloadavg()[0], 2)
            c.runs.append(outcome)
            log(f"  [{section}] round {r + 1}/{repeats} {c.name}: {describe(outcome)}")


# ---------------------------------------------------------------------------------------------------------
# Results.
# ---------------------------------------------------------------------------------------------------------
def summarize(c: Contender) -> dict[str, Any]:
    row: dict[str, Any] = {"contender": c.name, "library": c.lib, "spec": c.spec}
    if c.src is not None:
        row["baseline"] = True
    if c.unavailable:
        return {**row, "status": "n/a", "why": c.unavailable}
    good = [o for o in c.runs if o.status == "ok"]
    bad = [o for o in c.runs if o.status != "ok"]
    row["runs"] = [
        {"status": o.status, "wall": round(o.wall, 2), "detail": o.detail, **o.result} for o in c.runs
    ]
    if not good:
        return {**row, "status": bad[0].status if bad else "not run"}
    best = min(good, key=lambda o: o.result["seconds"])
    got = best.result
    return {
        **row,
        "status": "ok" if not bad else f"ok in {len(good)} of {len(c.runs)} rounds",
        "seconds": round(got["seconds"], 3),
        "samples": got["samples"],
        "samples_per_s": round(got["samples"] / got["seconds"], 1),
        "first_sample_ms": round(1000 * min(o.result["first_seconds"] for o in good), 1),
        "peak_rss_mib": round(max(o.result["vmhwm"] for o in good) / MIB, 1),
        "item_type": got["item_type"],
        "label_type": got["label_type"],
        "touched": got["touched"],
        "rounds": len(good),
        "load_1min_runs": [o.result.get("load_1min") for o in c.runs],
    }


SECTION_TITLES = {
    "raw": "1. Raw bytes, one process, shuffle on",
    "loader": f"2. Raw bytes through a DataLoader (batch {BATCH}, {WORKERS} workers)",
    "decode": f"3. Decoded to uint8 CHW tensors ({SIDE}x{SIDE})",
}
BARE_LOADER = "bare torchcodec decode_jpeg, DataLoader workers, streamer.batch.collate"
REFERENCE = {
    "raw": "ours, decode=False",
    "loader": "ours, list collate",
    "decode": "bare torchcodec decode_jpeg, bytes in memory",
}


def _cell_status(row: dict[str, Any]) -> str:
    status = row["status"]
    if status == "n/a":
        return f"n/a ({row['why']})"
    if status == "hangs":
        return f"hangs (killed after {row['runs'][0]['wall']:.0f} s)"
    if status == "error":
        last = [line for line in row["runs"][0]["detail"].strip().splitlines() if line.strip()]
        return "fails: " + (last[-1][:120] if last else "?").replace("|", "/")
    if status == "wrong":
        return "wrong: " + row["runs"][0]["detail"].replace("|", "/")
    return status


def section_markdown(section: str, rows: list[dict[str, Any]]) -> list[str]:
    by_name = {r["contender"]: r for r in rows if "samples_per_s" in r}
    vs = "vs bare torchcodec (alike: in process or in workers)" if section == "decode" else "vs ours"
    header = ["contender", "samples/s", vs, "first sample (ms)", "best (s)", "peak RSS (MiB)", "handed out"]
    lines = []
    for r in rows:
        if "samples_per_s" not in r:
            lines.append([r["contender"], _cell_status(r), "", "", "", "", ""])
            continue
        loader_row = section == "decode" and "DataLoader" in r["contender"]
        ref = by_name.get(BARE_LOADER if loader_row else REFERENCE[section])
        ratio = f"{r['samples_per_s'] / ref['samples_per_s']:.2f}x" if ref else ""
        handed = r["item_type"] + ("" if section == "raw" else f"; {r['touched']}")
        note = "" if r["status"] == "ok" else f" ({r['status']})"
        lines.append(
            [
                r["contender"] + note,
                f"{r['samples_per_s']:,.0f}",
                ratio,
                f"{r['first_sample_ms']:,.0f}",
                f"{r['seconds']:.2f}",
                f"{r['peak_rss_mib']:.0f}",
                handed,
            ]
        )
    loads = [x for r in rows for x in r.get("load_1min_runs", []) if x is not None]
    load = f"1-minute load average after its runs: {min(loads):.1f}-{max(loads):.1f}." if loads else ""
    return [f"## {SECTION_TITLES[section]}", "", table(header, lines), "", *_vs_baseline(rows), load, ""]


def _vs_baseline(rows: list[dict[str, Any]]) -> list[str]:
    """A line giving each of today's ours rows as a multiple of the baseline's, when it ran: best against
    best, and the median over rounds of the ratio within a round (the two ran a few seconds apart there,
    so a slow spell of the machine weighs on both)."""
    base = next((r for r in rows if r.get("baseline") and "samples_per_s" in r), None)
    if base is None:
        return []
    ours = [r for r in rows if r["library"] == "ours" and not r.get("baseline") and "samples_per_s" in r]
    parts = []
    for r in ours:
        paired = [
            b["seconds"] / o["seconds"]
            for b, o in zip(base["runs"], r["runs"], strict=False)
            if b.get("status") == o.get("status") == "ok"
        ]
        spread = f"{min(paired):.2f}-{max(paired):.2f}x over {len(paired)}" if paired else ""
        within = f" (per round: median {statistics.median(paired):.2f}x, {spread})" if len(paired) > 1 else ""
        parts.append(f"{r['contender']} {r['samples_per_s'] / base['samples_per_s']:.2f}x{within}")
    return [
        f"Against the baseline ({base['contender']}, {base['samples_per_s']:,.0f}/s), best against best: "
        + "; ".join(parts)
        + ".",
        "",
    ]


def to_markdown(result: dict[str, Any]) -> str:
    m, data = result["machine"], result["data"]
    vers = result["versions"]
    out = ["# Raw reads: ours vs LitData vs MosaicML streaming (issue 15)", ""]
    out += machine_lines({**m, "versions": {}}, f"shardstream {m['shardstream_commit']}")[:1]
    out += [
        "Versions: "
        + "; ".join(
            f"{LABEL[lib]} venv: " + ", ".join(f"{k} {v}" for k, v in got.items())
            for lib, got in vers.items()
        )
        + f"; source snapshot {m['source_fingerprint']}.  ",
        f"Command: `{result['command']}`; {result['repeats']} round(s), best counts; timeout "
        f"{result['timeout']:.0f} s a run; {result['total_seconds']:.0f} s in all.",
        "",
        f"Data: {data['source']['samples']:,} samples, {SIDE}x{SIDE} JPEGs averaging "
        f"{data['source']['mean_jpeg_bytes'] / 1e3:.1f} KB ({data['source']['jpeg_bytes'] / 1e6:.0f} MB) "
        "+ an int label each. Every contender reads the whole epoch, shuffle on, touching each image "
        "(`len()`, first byte) and label (`int()`); counts, byte totals and the label sum are checked. "
        "Fresh subprocess per run, timed after imports with dataset construction included; first sample = "
        "construction start to the first sample (or batch) in hand, least over the rounds. Peak RSS is the "
        "main process's VmHWM (DataLoader workers not included).",
        "",
        table(
            ["format", "written in (s)", "shards", "on disk (MB)"],
            [
                [LABEL[lib], f"{f['seconds']:.1f}", f["shards"], f"{f['bytes'] / 1e6:.0f}"]
                for lib, f in data["formats"].items()
            ],
        ),
        "",
        f"Probed in the measured copy of the streamer: zero_copy {result['probe']['zero_copy']}, raw_collate "
        f"{result['probe']['raw_collate']}.",
        "",
    ]
    for section in SECTIONS:
        if section in result["sections"]:
            out += section_markdown(section, result["sections"][section])
    hung = [
        r for rows in result["sections"].values() for r in rows if r["status"] in ("hangs", "error", "wrong")
    ]
    if hung:
        out += ["## Runs that did not finish or were wrong", ""]
        for r in hung:
            run = r["runs"][0]
            if r["status"] == "hangs":
                what = run["evidence"]
            else:
                what = " / ".join(run["detail"].strip().splitlines()[-3:])[-400:]
            out.append(f"- **{r['contender']}**: {r['status']}: " + what.replace("`", "'"))
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--setup", action="store_true", help="make the peers' venvs that are missing, then exit"
    )
    parser.add_argument("--quick", action="store_true", help="2,000 samples, one round, results not saved")
    parser.add_argument("--samples", type=int, help="samples (default 10000; quick 2000)")
    parser.add_argument("--repeats", type=int, help="rounds, best counts (default 3; quick 1)")
    parser.add_argument(
        "--only", choices=SECTIONS, action="append", help="run only this section (repeatable)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a run counts as hung")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    parser.add_argument(
        "--workdir", type=Path, default=Path("/tmp/rawpeers"), help="data (kept between runs)"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--no-save", action="store_true", help="print the report only")
    parser.add_argument(
        "--baseline",
        default=ISSUE_BASELINE,
        help=f"a commit of ours also measured in the raw and loader sections, its sources and C extensions "
        f"built under the workdir (default {ISSUE_BASELINE}: the code the issue was filed against); "
        "'none' to skip",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    global SRC
    args = parse_args(argv)
    if args.setup:
        setup_venvs()
        return 0
    check_venvs()
    samples = args.samples or (2000 if args.quick else 10_000)
    repeats = args.repeats or (1 if args.quick else 3)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    SRC = snapshot_sources(work / "snapshot")
    # Compiled now, so no child compiles a module it imports lazily (the streamer's) inside its timing.
    compileall.compile_dir(SRC, quiet=1)
    lib_versions = versions()
    log(f"workdir {work}; versions {lib_versions}")
    probe = run_child("ours", "probe", {}, timeout=120)
    if probe.status != "ok":
        raise SystemExit(f"probing our ShardDataset failed: {probe.detail}")
    log(f"probe: zero_copy {probe.result['zero_copy']}, raw_collate {probe.result['raw_collate']}")
    if probe.result["raw_collate_doc"]:
        log("raw_collate's docstring:\n" + probe.result["raw_collate_doc"])
    root = work / f"data-{samples}-seed{args.seed}"
    source = make_source(root, samples, args.seed)
    formats = make_formats(root, lib_versions)
    files = [
        Path(d, name) for lib in formats for d, _, names in os.walk(root / lib / "data") for name in names
    ]
    warmed = warm_read(files)
    log(f"page cache warmed: {warmed / 1e6:.0f} MB in {len(files)} files")
    baseline = None if args.baseline.lower() == "none" else make_baseline(args.baseline, work)
    result: dict[str, Any] = {
        "quick": args.quick,
        "command": command_line("stream/raw_peers_bench.py", argv),
        "machine": {**machine_facts(), "source_fingerprint": source_fingerprint(SRC)},
        "versions": lib_versions,
        "repeats": repeats,
        "timeout": args.timeout,
        "probe": {k: v for k, v in probe.result.items() if k not in ("source_files", "vmhwm")},
        "baseline": {"rev": baseline.rev, "commit": baseline.commit} if baseline else None,
        "data": {"source": source, "formats": formats, "workdir": str(root)},
        "sections": {},
    }
    for section in args.only or SECTIONS:
        log(f"[{section}] {SECTION_TITLES[section]}, {repeats} round(s)")
        contenders = contenders_for(section, formats, probe.result, baseline)
        run_rounds(section, contenders, repeats, args.timeout, source)
        result["sections"][section] = [summarize(c) for c in contenders]
    result["total_seconds"] = round(time.perf_counter() - started, 1)
    note_source_drift(result, SRC, log)
    markdown = to_markdown(result)
    print(markdown)
    if not (args.quick or args.no_save):
        stem = "raw-peers-" + time.strftime("%Y-%m-%d") + ("-" + "-".join(args.only) if args.only else "")
        save_results(args.results, stem, result, markdown, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
