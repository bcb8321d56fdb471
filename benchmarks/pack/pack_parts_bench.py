#!/usr/bin/env python3
"""Packing in parts: what Ray costs over the local packer, same input, same workers, side by side in one run.

Four ways to pack the same JSONL manifest (20,000 records, each pointing at a 16-32 KB random-bytes ``.jpg``,
~490 MB), each with the same ``--workers N``:

a. ``classic``    ``packer.pack(src, out, PackOptions(max_size=..., workers=N))``: one packer, N loaders
b. ``local``      ``packer.cluster.pack_in_parts(..., partition_rows=R)``: the parts one after another in
                  the driver, each with N loader processes, then the commit
c. ``ray``        ``pack_in_parts(..., engine="ray")``: starts its own local Ray head with N CPUs (`ray
                  start`), runs the parts as Ray tasks (N at once, one loader each), commits, ends the head.
                  What a user of ``shardstream pack --engine ray`` pays.
d. ``ray-warm``   the same on a head this benchmark started once beforehand (``ray_address=``): Ray's cost
                  without the head's start-up

Every run is a fresh subprocess under ``/usr/bin/time -v``; the four take turns (a b c d, a b c d, ...) and
the best of the rounds counts. ``seconds`` is timed inside the driver around the call (imports of packer
excluded; ``import ray``, the head's start, ``ray.init`` and the commit included, as a user pays them);
``wall`` is the whole subprocess. After a ``ray`` run the benchmark waits for its head's processes to end
(they do so in the background after the driver exits) before the next run starts, and every run's output
is hashed, deleted and ``sync``-ed outside the timing.

Memory: the driver's own peak (``VmHWM``, read just before it exits), ``/usr/bin/time -v``'s figure (the
driver and the children it reaped), and the peak sum of PSS over every process of the run (driver, loader
processes, forkserver, and for Ray its head session: GCS, raylet, workers), sampled every 0.5 s. For ``d``
the pre-started head's processes are in that sum too. Ray workers' memory is never in the driver's figures.

The outputs of b, c and d must be byte-identical (sha256 of every file, every round); a's differ by design
(shards are cut per part), so the benchmark also checks that a and b hold the same members in the same
order, and reports the shard counts and what else differs.

    python3 benchmarks/pack/pack_parts_bench.py                 # --workers 2, best of 3 (~2.5 min on 2 cores)
    python3 benchmarks/pack/pack_parts_bench.py --workers 2 --workers 1   # both (~4.5 min)
    python3 benchmarks/pack/pack_parts_bench.py --quick         # 4,000 records, 1 round, not saved

Results: markdown on stdout, plus ``benchmarks/results/<stem>.{json,md}`` (default ``pack-parts-<date>``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import REPO, RESULTS, SOURCE_PACKAGES, TIME_BIN, warm_tree
from harness.report import machine_facts, save_results, stamp, table, versions
from harness.sources import check_sources, imported_sources, source_fingerprint

MODES = ("classic", "local", "ray", "ray-warm")
LABELS = {
    "classic": "(a) classic `pack()`",
    "local": "(b) in parts, local engine",
    "ray": "(c) in parts, Ray, own head (start-up included)",
    "ray-warm": "(d) in parts, Ray, head already up",
}
INDEX_NAME = "shardstream-index.json"  # what the packer writes last (shardstream.format.INDEX_NAME)
MB, MIB = 1e6, 1024  # MB for throughput, MiB (from kB) for memory
SAMPLE_EVERY = 0.5  # seconds between PSS samples
TEARDOWN_LIMIT = 60.0  # seconds to wait for a run's Ray head to end after its driver exits


# ---------------------------------------------------------------------------------------------------------
# The input: a JSONL manifest over random-bytes .jpg files (the packer copies them unopened).
# ---------------------------------------------------------------------------------------------------------
def make_corpus(root: Path, records: int, min_kb: int, max_kb: int) -> Path:
    """``root/manifest.jsonl`` (reused when made with the same parameters); return its path."""
    params = {"records": records, "min_kb": min_kb, "max_kb": max_kb, "seed": 0, "shape": "id+image+caption"}
    manifest, marker = root / "manifest.jsonl", root / ".bench-params.json"
    if marker.exists() and json.loads(marker.read_text()) == params:
        return manifest
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = random.Random(0)
    with open(manifest, "w", encoding="utf-8") as handle:
        for i in range(records):
            rel = f"media/{i // 1000:03d}/{i:06d}.jpg"
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(rng.randbytes(rng.randint(min_kb * 1024, max_kb * 1024)))
            caption = f"Random bytes number {i}, {path.stat().st_size} of them."
            handle.write(json.dumps({"id": f"r{i:06d}", "image": rel, "caption": caption}) + "\n")
    marker.write_text(json.dumps(params))
    return manifest


# ---------------------------------------------------------------------------------------------------------
# The code measured: the committed SOURCE_PACKAGES (other sessions edit the working tree mid-run).
# ---------------------------------------------------------------------------------------------------------
def snapshot_commit(dest: Path, rev: str) -> str:
    """``git archive`` of the SOURCE_PACKAGES at ``rev`` into ``dest``, plus the tree's built extensions
    whose C source is the committed one; return the commit's full hash."""
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run(
        [*git, "rev-parse", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(
        [*git, "archive", commit, "--", *SOURCE_PACKAGES], capture_output=True, check=True
    )
    subprocess.run(["tar", "x", "-C", str(dest)], input=archive.stdout, check=True)
    for built in (p for package in SOURCE_PACKAGES for p in (REPO / package).rglob("*.so")):
        c_source = built.parent / (built.name.split(".", 1)[0] + ".c")
        copied = dest / c_source.relative_to(REPO)
        if copied.exists() and c_source.exists() and copied.read_bytes() == c_source.read_bytes():
            shutil.copy2(built, dest / built.relative_to(REPO))
    return commit


# ---------------------------------------------------------------------------------------------------------
# Child side: one pack, timed around the call.
# ---------------------------------------------------------------------------------------------------------
def child(args: argparse.Namespace) -> None:
    import resource

    from packer import PackOptions, pack
    from packer.cluster import pack_in_parts

    options = PackOptions(max_size=args.max_size, workers=args.child_workers)
    started = time.perf_counter()
    if args.child == "classic":
        summary = pack(args.src, args.out, options)
    elif args.child == "local":
        summary = pack_in_parts(args.src, args.out, options, partition_rows=args.partition_rows)
    else:
        address = args.address if args.child == "ray-warm" else None
        summary = pack_in_parts(
            args.src, args.out, options, partition_rows=args.partition_rows, engine="ray", ray_address=address
        )
    seconds = time.perf_counter() - started
    status = Path("/proc/self/status").read_text()
    out = {
        "seconds": seconds,
        "summary_seconds": summary.seconds,
        "samples": summary.samples,
        "shards": summary.shards,
        "bytes": summary.bytes,
        "skipped": summary.skipped,
        "vmhwm_kb": int(status.split("VmHWM:")[1].split()[0]),
        "reaped_children_maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        "ray_imported": "ray" in sys.modules,
        "sources": imported_sources(),
    }
    print(json.dumps(out), flush=True)


def probe_child(address: str) -> None:
    """Ray's fixed costs, in a fresh process: import, connect, first task (a worker starts), shutdown."""
    times: dict[str, Any] = {}
    started = time.perf_counter()
    import ray

    times["import_ray"] = time.perf_counter() - started
    mark = time.perf_counter()
    ray.init(address=address, logging_level="ERROR")
    times["ray_init"] = time.perf_counter() - mark

    def where() -> str:
        import packer

        return str(packer.__file__)

    mark = time.perf_counter()
    times["worker_imports_packer_from"] = ray.get(ray.remote(num_cpus=1)(where).remote())
    times["first_task"] = time.perf_counter() - mark
    mark = time.perf_counter()
    ray.get(ray.remote(num_cpus=1)(lambda: 1).remote())
    times["second_task"] = time.perf_counter() - mark
    mark = time.perf_counter()
    ray.shutdown()
    times["shutdown"] = time.perf_counter() - mark
    print(json.dumps(times), flush=True)


# ---------------------------------------------------------------------------------------------------------
# Parent side: processes of a run, their PSS, one run.
# ---------------------------------------------------------------------------------------------------------
def processes() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, session id) of every process on the machine."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            found[int(name)] = (int(fields[1]), int(fields[3]))
    return found


def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """Every SAMPLE_EVERY s, the PSS summed over the run's processes: its own session (``root`` is its
    leader), every session led by a child of one of those (a head started by the driver), ``extra``."""

    def __init__(self, root: int, extra: tuple[int, ...] = ()) -> None:
        super().__init__(daemon=True)
        self.root, self.sessions, self.extra = root, {root, *extra}, set(extra)
        self.driver_sessions = {root}
        self.peak_kb = self.peak_driver_kb = self.peak_ray_kb = self.samples = 0
        self.cpu_seconds = 0.0
        self.done = threading.Event()

    def sample(self) -> None:
        started = time.thread_time()
        procs = processes()
        ours = {pid for pid, (_, sid) in procs.items() if sid in self.sessions}
        for pid, (ppid, sid) in procs.items():
            if pid == sid and ppid in ours and sid not in self.sessions:
                self.sessions.add(sid)  # a Ray head the driver started in its own session
        driver = ray = 0
        for pid, (_, sid) in procs.items():
            if sid in self.driver_sessions:
                driver += pss_kb(pid)
            elif sid in self.sessions:
                ray += pss_kb(pid)
        self.peak_kb = max(self.peak_kb, driver + ray)
        self.peak_driver_kb, self.peak_ray_kb = max(self.peak_driver_kb, driver), max(self.peak_ray_kb, ray)
        self.samples += 1
        self.cpu_seconds += time.thread_time() - started

    def run(self) -> None:
        while not self.done.wait(SAMPLE_EVERY):
            self.sample()

    def head_sessions(self) -> set[int]:
        return self.sessions - self.driver_sessions - self.extra


def session_alive(sid: int) -> bool:
    return any(s == sid for _, s in processes().values())


def child_command(
    mode: str, src: Path, out: Path, workers: int, args: argparse.Namespace, address: str
) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        mode,
        "--src",
        str(src),
        "--out",
        str(out),
        "--child-workers",
        str(workers),
        "--partition-rows",
        str(args.partition_rows),
        "--max-size",
        str(args.max_size),
        "--address",
        address,
    ]


def spawn_run(cmd: list[str], src_copy: Path, extra_sessions: tuple[int, ...]) -> dict[str, Any]:
    """``cmd`` under /usr/bin/time -v in a session of its own, cwd and PYTHONPATH the sources' copy."""
    env = dict(os.environ, PYTHONPATH=str(src_copy), PYTHONHASHSEED="0")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [TIME_BIN, "-v", *cmd], stdout=out, stderr=err, cwd=src_copy, env=env, start_new_session=True
        )
        sampler = Sampler(proc.pid, extra_sessions)
        sampler.start()
        code = proc.wait()
        wall = time.perf_counter() - started
        sampler.done.set()
        sampler.join()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}:\n{stderr[-3000:]}")
    figures = json.loads(stdout.strip().splitlines()[-1])
    maxrss = [line for line in stderr.splitlines() if "Maximum resident set size" in line]
    figures.update(
        wall=wall,
        time_v_maxrss_kb=int(maxrss[-1].split(":")[1]) if maxrss else 0,
        peak_pss_kb=sampler.peak_kb,
        peak_pss_driver_kb=sampler.peak_driver_kb,
        peak_pss_ray_kb=sampler.peak_ray_kb,
        pss_samples=sampler.samples,
        sampler_cpu_seconds=round(sampler.cpu_seconds, 3),
    )
    teardown_started = time.perf_counter()
    for sid in sampler.head_sessions():  # a head the driver started ends in the background: wait for it
        while session_alive(sid) and time.perf_counter() - teardown_started < TEARDOWN_LIMIT:
            time.sleep(0.1)
        if session_alive(sid):
            figures["head_left_running"] = sid
    figures["head_teardown_after_exit"] = round(time.perf_counter() - teardown_started, 2)
    return figures


def file_digests(out: Path) -> dict[str, str]:
    digests = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        digests[path.relative_to(out).as_posix()] = digest.hexdigest()
    return digests


def members_digest(out: Path) -> tuple[str, int, list[int]]:
    """sha256 over every member's header fields and bytes, shards in name order; member count; shard sizes."""
    digest, members, sizes = hashlib.sha256(), 0, []
    for shard in sorted(out.glob("*.tar")):
        sizes.append(shard.stat().st_size)
        with tarfile.open(shard, "r|") as tar:
            for member in tar:
                head = (
                    member.name,
                    member.size,
                    member.mtime,
                    member.mode,
                    member.uid,
                    member.gid,
                    member.uname,
                    member.gname,
                    member.type,
                )
                digest.update(repr(head).encode())
                handle = tar.extractfile(member)
                digest.update(handle.read() if handle else b"")
                members += 1
    return digest.hexdigest(), members, sizes


def describe_diff(a: dict[str, str], b: dict[str, str]) -> dict[str, Any]:
    same = sorted(k for k in a if b.get(k) == a[k])
    return {
        "files_a": len(a),
        "files_b": len(b),
        "identical_files": same,
        "only_in_a": sorted(set(a) - set(b)),
        "only_in_b": sorted(set(b) - set(a)),
        "differing": sorted(k for k in a if k in b and a[k] != b[k]),
    }


# ---------------------------------------------------------------------------------------------------------
# One workers value: a warm head, the rounds, the checks.
# ---------------------------------------------------------------------------------------------------------
def bench_workers(
    workers: int, manifest: Path, work: Path, src_copy: Path, args: argparse.Namespace, log: Any
) -> dict[str, Any]:
    from packer.cluster.rayhead import LocalHead

    os.environ["PYTHONPATH"] = str(src_copy)  # the warm head's workers import the copy too
    mark = time.perf_counter()
    head = LocalHead.start(workers)
    head_start = time.perf_counter() - mark
    head_sid = head.process.pid  # started in a session of its own
    log(f"[workers {workers}] warm head at {head.address} started in {head_start:.1f}s")
    result: dict[str, Any] = {"workers": workers, "warm_head_start_seconds": round(head_start, 2)}
    try:
        idle = Sampler(-1, (head_sid,))
        idle.sample()
        result["warm_head_idle_pss_mib"] = round(idle.peak_kb / MIB, 1)
        probe = spawn_run(
            [sys.executable, str(Path(__file__).resolve()), "--probe", head.address], src_copy, ()
        )
        result["ray_fixed_costs"] = {
            k: (round(v, 3) if isinstance(v, float) else v)
            for k, v in probe.items()
            if k not in ("pss_samples", "sampler_cpu_seconds")
        }
        log(f"  probe: {json.dumps(result['ray_fixed_costs'])}")
        runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        digests: dict[str, list[dict[str, str]]] = {mode: [] for mode in MODES}
        members: dict[str, Any] = {}
        for round_ in range(args.repeats):
            for mode in MODES:
                out = work / "out"
                shutil.rmtree(out, ignore_errors=True)
                os.sync()
                cmd = child_command(mode, manifest, out, workers, args, head.address)
                figures = spawn_run(cmd, src_copy, (head_sid,) if mode == "ray-warm" else ())
                check_sources(mode, figures.pop("sources"), src_copy)
                figures["load_1min"] = round(os.getloadavg()[0], 2)
                runs[mode].append(figures)
                digests[mode].append(file_digests(out))
                if round_ == 0 and mode in ("classic", "local"):
                    members[mode] = members_digest(out)
                    members[f"{mode}_index"] = json.loads((out / INDEX_NAME).read_text())
                shutil.rmtree(out, ignore_errors=True)
                os.sync()
                log(
                    f"  round {round_ + 1}/{args.repeats} {mode}: {figures['seconds']:.2f}s "
                    f"(wall {figures['wall']:.2f}s), driver {figures['vmhwm_kb'] / MIB:.0f} MiB, "
                    f"all {figures['peak_pss_kb'] / MIB:.0f} MiB PSS, {figures['shards']} shards, "
                    f"teardown {figures['head_teardown_after_exit']}s, load {figures['load_1min']}"
                )
                if figures["samples"] != args.records:
                    raise RuntimeError(f"{mode} packed {figures['samples']} samples, not {args.records}")
    finally:
        mark = time.perf_counter()
        head.stop()
        result["warm_head_stop_seconds"] = round(time.perf_counter() - mark, 2)
    result["runs"] = runs
    result["identity"] = identity(digests, members)
    return result


def identity(digests: dict[str, list[dict[str, str]]], members: dict[str, Any]) -> dict[str, Any]:
    reference = digests["local"][0]
    parts_same = all(d == reference for mode in ("local", "ray", "ray-warm") for d in digests[mode])
    classic_stable = all(d == digests["classic"][0] for d in digests["classic"])
    (a_digest, a_members, a_sizes), (b_digest, b_members, b_sizes) = members["classic"], members["local"]
    return {
        "parts_outputs_identical": parts_same,
        "parts_runs_compared": sum(len(digests[m]) for m in ("local", "ray", "ray-warm")),
        "parts_files": len(reference),
        "parts_file_digests": reference,
        "classic_identical_across_rounds": classic_stable,
        "classic_vs_parts": describe_diff(digests["classic"][0], reference),
        "classic_file_digests": digests["classic"][0],
        "same_members_in_same_order": a_digest == b_digest and a_members == b_members,
        "members": {"classic": a_members, "parts": b_members},
        "shard_sizes": {"classic": a_sizes, "parts": b_sizes},
        "index_differs_in": index_diff(members["classic_index"], members["local_index"]),
    }


def index_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The index's top-level keys (and options) whose values differ between (a) and the parts."""
    keys = sorted(k for k in set(a) | set(b) if k != "options" and a.get(k) != b.get(k))
    options_a, options_b = a.get("options", {}), b.get("options", {})
    changed = sorted(k for k in set(options_a) | set(options_b) if options_a.get(k) != options_b.get(k))
    return keys + [f"options.{k}: {options_a.get(k)!r} -> {options_b.get(k)!r}" for k in changed]


# ---------------------------------------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------------------------------------
def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: r["seconds"])


def summarize(section: dict[str, Any], input_bytes: int, records: int) -> list[dict[str, Any]]:
    rows = []
    top = {mode: best(section["runs"][mode]) for mode in MODES}
    for mode in MODES:
        runs, b = section["runs"][mode], top[mode]
        rows.append(
            {
                "mode": mode,
                "seconds": round(b["seconds"], 2),
                "seconds_runs": [round(r["seconds"], 2) for r in runs],
                "wall": round(b["wall"], 2),
                "wall_best": round(min(r["wall"] for r in runs), 2),
                "samples_per_s": round(records / b["seconds"]),
                "mb_per_s": round(input_bytes / MB / b["seconds"], 1),
                "driver_vmhwm_mib": round(max(r["vmhwm_kb"] for r in runs) / MIB),
                "time_v_maxrss_mib": round(max(r["time_v_maxrss_kb"] for r in runs) / MIB),
                "peak_pss_all_mib": round(max(r["peak_pss_kb"] for r in runs) / MIB),
                "peak_pss_driver_session_mib": round(max(r["peak_pss_driver_kb"] for r in runs) / MIB),
                "peak_pss_ray_head_mib": round(max(r["peak_pss_ray_kb"] for r in runs) / MIB),
                "shards": b["shards"],
                "vs_classic": round(b["seconds"] / top["classic"]["seconds"], 2),
                "vs_local": round(b["seconds"] / top["local"]["seconds"], 2),
                "wall_vs_classic": round(b["wall"] / top["classic"]["wall"], 2),
                "wall_vs_local": round(b["wall"] / top["local"]["wall"], 2),
                "head_teardown_after_exit_max": max(r["head_teardown_after_exit"] for r in runs),
            }
        )
    return rows


def markdown(result: dict[str, Any]) -> str:
    m, inp, rows_per_part = result["machine"], result["input"], result["partition_rows"]
    versions_text = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    packages = "/".join(SOURCE_PACKAGES)
    lines = [
        f"# Packing in parts: Ray vs the local packer, {m['date']}, best of {result['repeats']}",
        "",
        f"Machine: {m['nproc']} CPUs ({m['usable_cpus']} usable), {m['cpu']}, {m['memory']} RAM; Python "
        f"{m['python']}; {versions_text}. Measured: {packages} as committed at {m['measured_commit'][:10]} "
        "(`git archive`, so edits in the working tree cannot change the code mid-run).",
        "",
        f"Command: `{result['command']}` ({result['total_seconds']:.0f} s in all).",
        "",
        f"Input: a JSONL manifest of {inp['records']:,} records (`id`, `image`, `caption`), each image "
        f"{inp['min_kb']}-{inp['max_kb']} KiB of random bytes named `.jpg` (copied unopened): "
        f"{inp['bytes'] / MB:.0f} MB in {inp['files']:,} files, page cache warm. `max_size` "
        f"{result['max_size'] / MB:g} MB; `partition_rows={rows_per_part:,}` "
        f"({-(-inp['records'] // rows_per_part)} parts).",
        "",
    ]
    for section in result["sections"]:
        lines += [f"## workers = {section['workers']}", "", *section_lines(section), ""]
    lines += [
        "Columns: `seconds` is timed in the driver around the call (packer's imports excluded; `import "
        "ray`, the head's start for (c), `ray.init`, the parts and the commit included); `rounds` lists "
        "every round's; `wall` is the whole subprocess of the best round (interpreter, imports, Ray's "
        "shutdown at exit). samples/s and MB/s (input bytes) from `seconds`. Ratios are of times (>1: "
        "slower). `driver RSS`: the driver's own VmHWM; `time -v`: the driver and the children it reaped "
        "(not its forkserver's loaders, nor any Ray process); `all PSS`: the peak of the PSS summed over "
        "every process of the run, driver, loaders and Ray's head session (GCS, raylet, workers; for (d) "
        f"the pre-started head, whose idle figure is above), sampled every {SAMPLE_EVERY} s. Memory "
        "figures are the largest of the rounds. Ray workers' memory is never in the driver's figures.",
        "",
        "Parallelism differs by engine at the same `workers` N: (a) and (b) run one packer with N loader "
        "processes (a forkserver pool when N > 1, in (b) one pool kept across the parts); (c) and (d) run "
        "N parts at once as Ray tasks, each a packer with one loader, in the task's own process.",
        "",
    ]
    return "\n".join(lines)


def section_lines(section: dict[str, Any]) -> list[str]:
    costs, ident = section["ray_fixed_costs"], section["identity"]
    header = [
        "mode",
        "seconds",
        "rounds",
        "wall",
        "samples/s",
        "MB/s",
        "driver RSS MiB",
        "time -v MiB",
        "all PSS MiB",
        "shards",
        "time vs (a)",
        "time vs (b)",
        "wall vs (a), (b)",
    ]
    rows = [
        [
            LABELS[r["mode"]],
            r["seconds"],
            " ".join(map(str, r["seconds_runs"])),
            r["wall"],
            f"{r['samples_per_s']:,}",
            r["mb_per_s"],
            r["driver_vmhwm_mib"],
            r["time_v_maxrss_mib"],
            r["peak_pss_all_mib"],
            r["shards"],
            f"{r['vs_classic']:.2f}x",
            f"{r['vs_local']:.2f}x",
            f"{r['wall_vs_classic']:.2f}x, {r['wall_vs_local']:.2f}x",
        ]
        for r in section["rows"]
    ]
    diff, sizes = ident["classic_vs_parts"], ident["shard_sizes"]
    same = ", ".join(diff["identical_files"]) or "none"
    return [
        table(header, rows),
        "",
        f"Ray's fixed costs, once each in fresh processes: `ray start` of the warm head "
        f"{section['warm_head_start_seconds']} s (idle, its processes hold "
        f"{section['warm_head_idle_pss_mib']} MiB PSS; stopping it and waiting: "
        f"{section['warm_head_stop_seconds']} s); `import ray` {costs['import_ray']} s; "
        f"`ray.init(address=...)` {costs['ray_init']} s; a first task on a new connection "
        f"{costs['first_task']} s, a second {costs['second_task']} s; `ray.shutdown()` "
        f"{costs['shutdown']} s. "
        f"After a (c) run its head took up to {section['rows'][2]['head_teardown_after_exit_max']} s more "
        "to end (in the background, not in `wall`; the next run waited for it). Ray's workers imported "
        f"packer from `{costs['worker_imports_packer_from']}`.",
        "",
        f"Identity: (b), (c) and (d) byte-identical in every round: **{ident['parts_outputs_identical']}** "
        f"({ident['parts_runs_compared']} runs x {ident['parts_files']} files, the sha256 of each). (a) "
        f"identical across its rounds: {ident['classic_identical_across_rounds']}. (a) against the parts: "
        f"{len(sizes['classic'])} shards against {len(sizes['parts'])} (shards are cut per part), the same "
        f"members (names, tar headers, bytes) in the same order: **{ident['same_members_in_same_order']}** "
        f"({ident['members']['classic']:,} and {ident['members']['parts']:,}); files identical: {same} "
        f"({diff['files_a']} files against {diff['files_b']}); the indexes differ in: "
        f"{'; '.join(ident['index_differs_in'])}.",
        "",
        f"Shard sizes, MB: (a) {', '.join(f'{s / MB:.1f}' for s in sizes['classic'])}; "
        f"parts {', '.join(f'{s / MB:.1f}' for s in sizes['parts'])}.",
    ]


# ---------------------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="4,000 records, 1 round, not saved: a smoke run")
    parser.add_argument("--records", type=int, help="manifest records (default 20000; quick 4000)")
    parser.add_argument("--min-kb", type=int, default=16, help="smallest image, KiB (default 16)")
    parser.add_argument("--max-kb", type=int, default=32, help="largest image, KiB (default 32)")
    parser.add_argument("--partition-rows", type=int, help="records a part (default records / 10)")
    parser.add_argument(
        "--max-size", type=int, default=32 * 10**6, help="shard size cap, bytes (default 32 MB)"
    )
    parser.add_argument("--workers", type=int, action="append", help="workers (repeatable; default 2)")
    parser.add_argument("--repeats", type=int, help="rounds (default 3; quick 1)")
    parser.add_argument(
        "--workdir", type=Path, help="where the corpus and outputs go (default: a /tmp folder)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the corpus (and a temp folder) at the end")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--rev", default="HEAD", help="the commit whose packer is measured (default HEAD)")
    parser.add_argument("--stem", help="results file name without extension (default pack-parts-<date>)")
    parser.add_argument("--no-save", action="store_true", help="print the report only")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--probe", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--child-workers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.records = args.records or (4000 if args.quick else 20_000)
    args.partition_rows = args.partition_rows or max(1, args.records // 10)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.workers = args.workers or [2]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args)
        return 0
    if args.probe:
        probe_child(args.probe)
        return 0
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if not os.access(TIME_BIN, os.X_OK):
        raise SystemExit(f"{TIME_BIN} is missing (apt-get install -y time)")
    temp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="pack-parts-", dir="/tmp")) if temp else args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        commit = snapshot_commit(work / "src", args.rev)
        src_copy = work / "src"
        facts = {
            **machine_facts(),
            "source_fingerprint": source_fingerprint(src_copy),
            "measured_commit": commit,
            "versions": versions("ray", "numpy", "pillow"),
        }
        log(f"workdir {work}; making the corpus ({args.records:,} records) ...")
        mark = time.perf_counter()
        manifest = make_corpus(work / "corpus", args.records, args.min_kb, args.max_kb)
        made = time.perf_counter() - mark
        input_bytes, files, warm_s = warm_tree(work / "corpus" / "media")
        input_bytes += manifest.stat().st_size
        log(
            f"  corpus: {input_bytes / MB:.0f} MB in {files + 1:,} files (made in {made:.1f}s, warmed "
            f"in {warm_s:.1f}s)"
        )
        command = " ".join(["python3", "benchmarks/pack/pack_parts_bench.py", *(argv or sys.argv[1:])])
        result: dict[str, Any] = {
            "command": command,
            "machine": facts,
            "repeats": args.repeats,
            "input": {
                "records": args.records,
                "files": files + 1,
                "bytes": input_bytes,
                "min_kb": args.min_kb,
                "max_kb": args.max_kb,
            },
            "max_size": args.max_size,
            "partition_rows": args.partition_rows,
            "sections": [],
        }
        for workers in args.workers:
            section = bench_workers(workers, manifest, work, src_copy, args, log)
            section["rows"] = summarize(section, input_bytes, args.records)
            result["sections"].append(section)
        result["total_seconds"] = round(time.perf_counter() - started, 1)
    finally:
        shutil.rmtree(work / "out", ignore_errors=True)
        shutil.rmtree(work / "src", ignore_errors=True)
        if not args.keep:
            shutil.rmtree(work / "corpus", ignore_errors=True)
            if temp:
                shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept the corpus in {work / 'corpus'}")
    text = markdown(result)
    print(text)
    stem = args.stem or (None if args.quick else f"pack-parts-{stamp(False)}")
    if stem and not args.no_save:
        save_results(args.results, stem, result, text, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
