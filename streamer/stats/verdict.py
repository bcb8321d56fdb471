"""The verdict: what the statistics say holds the loader back, in plain words; a pure function of the numbers.

Read in this order, the first that holds wins:

- ``buffer-filling``: the first batch took a quarter of the run and longer than every later wait
  together: the shuffle buffer filling (and the first shards opening): lower ``initial``.
- ``not-the-bottleneck``: after the first batch, steps waited under 10% of the time (``exposed``).
- ``cpu-bound``: workers waited for a CPU (ready to run, ``run_queue``) 30% of their time or more: more
  busy processes than cores (a worker slower than the others is then a symptom, not the cause).
- ``slow-worker``: one worker handed out under half the median worker's samples per second: named.
- ``hand-off-bound``: workers wait for the main process to take batches most of the time: the main
  process's receiving (unpickling) is the limit: ``raw_collate`` (batches in shared memory), or fewer
  and lighter fields.
- ``decode-bound``, ``io-bound``, ``loader-bound``: the stage the workers spend most of their busy time
  in (decoding; opening and waiting on bytes; the loader's own CPU: parsing, shuffling, collating), when
  it holds 40% or more of it, with what to do about it.
- ``balanced``: no stage stands out; ``no-data``: nothing sampled yet.

Trade-off: thresholds, not a model; each verdict states the figure it rests on, so a reader can judge.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from statistics import median
from typing import Any

EXPOSED_OK = 0.10  # steps waiting less than this of the time: the loader keeps up
FIRST = 0.25  # a first batch taking this much of the run, and more than all later waits: the fill
CPU_WAIT = 0.3  # workers ready to run but waiting for a CPU this much of their time: oversubscribed
IDLE = 0.5  # workers waiting this much of their time for the main process: hand-off bound
DOMINANT = 0.4  # a stage holding this much of the busy time names the bound
SLOW = 0.5  # a worker under this share of the median rate is slow
BUSY = ("open", "io", "decode", "other")
DECODE = ("decode-bound", "add DataLoader workers, decode fewer fields, or decode on the GPU")
IO = ("io-bound", "read further ahead (prefetch=, parts_in_flight=), or cache shards locally (cache_dir=)")
OPEN = ("io-bound", "opening shards costs the most: larger shards, or read further ahead (prefetch=)")
OTHER = ("loader-bound", "add DataLoader workers, or collate less in them (raw_collate)")
ADVICE = {"decode": DECODE, "io": IO, "open": OPEN, "other": OTHER}
NAMES = {
    "open": "opening shards",
    "io": "waiting on bytes",
    "decode": "decoding",
    "other": "in the loader's own work (parsing, shuffling, collating)",
}


def verdict(stats: Mapping[str, Any], trainer: Mapping[str, Any] | None = None) -> dict[str, str]:
    """{"code", "text"} from ``stats`` (``ds.stats()``'s ``workers``/``total``) and, when given, the
    trainer's view (``watch(loader).report()``)."""
    rows = dict(stats.get("workers", {}))
    if len(rows) > 1:
        rows.pop("main", None)  # with DataLoader workers the main process reads nothing
    wall = sum(r["wall"] for r in rows.values())
    if not rows or wall <= 0:
        return {"code": "no-data", "text": "nothing sampled yet: read some batches first"}
    if trainer and trainer.get("steps"):
        found = _trainers(trainer)
        if found is not None:
            return found
    cpu_wait = sum(r.get("run_queue", 0.0) for r in rows.values()) / wall
    if cpu_wait >= CPU_WAIT:
        return {
            "code": "cpu-bound",
            "text": f"workers waited for a CPU {cpu_wait:.0%} of their time: more busy processes than cores "
            f"({os.cpu_count()} here); fewer DataLoader workers, or less else running",
        }
    slow = _slow_worker(rows)
    if slow is not None:
        return slow
    seconds = {s: sum(r["seconds"].get(s, 0.0) for r in rows.values()) for s in (*BUSY, "cpu_wait", "idle")}
    if "main" in rows and trainer and trainer.get("steps"):
        # Without workers the reading thread is the trainer's: its CPU outside the loader's clocks is the
        # training step's too, so the loader's own share is what the waits leave.
        spent = seconds["open"] + seconds["io"] + seconds["decode"]
        seconds["other"] = max(0.0, float(trainer.get("wait_seconds", 0.0)) - spent)
    idle = seconds["idle"] / wall
    if idle >= IDLE and len(rows) >= 1 and "main" not in rows:
        return {
            "code": "hand-off-bound",
            "text": f"workers wait {idle:.0%} of their time for the main process to take batches: hand them "
            "over in shared memory (raw_collate) if they are not, or send fewer, lighter fields and do "
            "more of the work in the workers",
        }
    busy = sum(seconds[s] for s in BUSY)
    if busy <= 0:
        return {"code": "balanced", "text": "the loader was busy under one tick: nothing to judge"}
    stage = max(BUSY, key=lambda s: seconds[s])
    share = seconds[stage] / busy
    if stage in ("io", "open"):  # waiting on bytes, whether opening or reading
        share = (seconds["io"] + seconds["open"]) / busy
    if share < DOMINANT:
        return {
            "code": "balanced",
            "text": f"no stage holds {DOMINANT:.0%} of the busy time: {_shares(seconds, busy)}",
        }
    code, advice = ADVICE[stage]
    what = _kind(stats) if stage == "decode" else ""
    return {
        "code": code,
        "text": f"workers spend {share:.0%} of their busy time {NAMES[stage]}{what}: {advice}",
    }


def _trainers(trainer: Mapping[str, Any]) -> dict[str, str] | None:
    """The verdicts the trainer's view gives alone: buffer-filling, not-the-bottleneck; else None."""
    first, waited = float(trainer.get("first_wait", 0.0)), float(trainer.get("wait_seconds", 0.0))
    elapsed = first + waited + float(trainer.get("step_seconds", 0.0))
    if first > waited and first > FIRST * elapsed:
        return {
            "code": "buffer-filling",
            "text": f"the first batch took {first:.1f} s of the {elapsed:.1f} s run, the later ones "
            f"{waited:.1f} s in all (the shuffle buffer filling, the first shards opening): lower "
            "initial= (or buffer_size=)",
        }
    exposed = float(trainer.get("exposed", 0.0))
    if exposed < EXPOSED_OK:
        return {
            "code": "not-the-bottleneck",
            "text": f"steps waited for data {exposed:.0%} of the time after the first batch: the loader "
            "keeps up",
        }
    return None


def _slow_worker(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, str] | None:
    rates = {name: r["counts"]["samples"] / r["wall"] for name, r in rows.items() if r["wall"] > 0}
    if len(rates) < 2:
        return None
    middle = median(rates.values())
    name, rate = min(rates.items(), key=lambda kv: kv[1])
    if middle <= 0 or rate >= SLOW * middle:
        return None
    stages = rows[name]["seconds"]
    stage = max(stages, key=stages.get)
    return {
        "code": "slow-worker",
        "text": f"worker {name} hands out {rate:,.0f} samples/s against {middle:,.0f} for the median worker; "
        f"it spends most of its time {NAMES.get(stage, stage)}",
    }


def _shares(seconds: Mapping[str, float], busy: float) -> str:
    top = sorted(BUSY, key=lambda s: -seconds[s])[:3]
    return ", ".join(f"{s} {seconds[s] / busy:.0%}" for s in top)


def _kind(stats: Mapping[str, Any]) -> str:
    decode = stats.get("total", {}).get("decode", {})
    if not decode or not any(decode.values()):
        return ""
    kind = max(decode, key=decode.get)
    return f" (mostly {kind})"
