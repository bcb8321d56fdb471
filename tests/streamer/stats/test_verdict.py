"""The verdict, the watchdog's reports and the trainer's quantiles as pure functions of their numbers."""

from __future__ import annotations

import pytest

from streamer.stats.table import STAGES, pack, total, unpack
from streamer.stats.timers import KINDS
from streamer.stats.verdict import verdict
from streamer.stats.watch import Watch
from streamer.stats.watchdog import Watchdog, who_is


def row(samples=1000, wall=10.0, run_queue=0.0, **seconds):
    values = {s: 0.0 for s in STAGES} | seconds
    return unpack(pack(values, {}, {"samples": samples}, {"wall": wall, "run_queue": run_queue}))


def stats(**rows):
    return {"workers": rows, "total": total(rows)}


def test_each_verdict_from_the_numbers_that_make_it():
    assert verdict(stats())["code"] == "no-data"
    workers = {"0": row(decode=7, other=1, idle=2), "1": row(decode=7, other=1, idle=2)}
    assert verdict(stats(**workers))["code"] == "decode-bound"
    assert "88%" in verdict(stats(**workers))["text"]  # 14 of 16 busy seconds, said
    io = {"0": row(io=5, open=2, other=1, idle=2)}
    assert verdict(stats(**io))["code"] == "io-bound"
    idle = {"0": row(other=2, idle=8), "1": row(other=2, idle=8)}
    assert verdict(stats(**idle))["code"] == "hand-off-bound"
    slow = {"0": row(samples=1000), "1": row(samples=1000), "2": row(samples=300, io=9)}
    found = verdict(stats(**slow))
    assert (
        found["code"] == "slow-worker" and "worker 2" in found["text"] and "waiting on bytes" in found["text"]
    )
    crowded = {
        "0": row(decode=5, cpu_wait=2, idle=3, run_queue=4),
        "1": row(decode=5, cpu_wait=2, idle=3, run_queue=4),
    }
    assert verdict(stats(**crowded))["code"] == "cpu-bound"  # checked before the idle time's hand-off
    even = {"0": row(io=3, decode=3, other=3, idle=1)}
    assert verdict(stats(**even))["code"] == "balanced"


def test_the_trainers_view_comes_first():
    workers = {"0": row(decode=9, idle=1)}
    keeps_up = {"steps": 100, "first_wait": 0.5, "wait_seconds": 0.2, "step_seconds": 10.0, "exposed": 0.02}
    assert verdict(stats(**workers), keeps_up)["code"] == "not-the-bottleneck"
    filling = {"steps": 100, "first_wait": 8.0, "wait_seconds": 0.5, "step_seconds": 10.0, "exposed": 0.05}
    assert verdict(stats(**workers), filling)["code"] == "buffer-filling"
    waits = {"steps": 100, "first_wait": 0.5, "wait_seconds": 8.0, "step_seconds": 2.0, "exposed": 0.8}
    assert verdict(stats(**workers), waits)["code"] == "decode-bound"


def test_without_workers_the_loaders_own_work_is_what_the_waits_leave():
    # The main process's CPU is the training step's too: 9 s of "other" is mostly the step's.
    main = {"main": row(decode=0.5, other=9.0, idle=0.5)}
    waits = {"steps": 10, "first_wait": 0.1, "wait_seconds": 1.0, "step_seconds": 9.0, "exposed": 0.5}
    assert verdict(stats(**main), waits)["code"] == "decode-bound"


def test_the_watchdog_reports_once_per_period_and_when_samples_flow_again():
    said = []
    dog = Watchdog(2.0, who_is(1, 4, 0, 2), lambda: [("http://h/a.tar", 1536)], emit=said.append)
    dog.tick(0.0, 5, None)
    dog.tick(1.9, 5, None)
    assert said == []
    dog.tick(2.0, 5, None)
    assert len(said) == 1 and said[0].startswith("rank 1 of 4, DataLoader worker 0 of 2 has handed out")
    assert "http://h/a.tar at byte 1536" in said[0]
    dog.tick(3.5, 5, None)
    assert len(said) == 1  # once per period
    dog.tick(4.0, 5, None)
    assert len(said) == 2
    dog.tick(9.0, 5, None, waiting=True)  # waiting for its consumer: not a stall
    assert said[-1].endswith("is moving again after 9.0 s")
    dog.tick(10.0, 5, None)
    dog.tick(11.5, 5, None)
    assert len(said) == 4 and "has handed out no sample for 2 s" in said[-1]


def test_the_watchdog_refuses_a_period_that_is_not_positive():
    with pytest.raises(ValueError, match="watchdog must be a positive number of seconds"):
        Watchdog(0, "x", list)


def test_wait_quantiles_are_within_their_bucket_and_the_first_wait_stands_apart():
    watch = Watch([])
    watch._waited(5.0)  # the first batch: reported on its own
    for wait in [0.001] * 198 + [0.1]:
        watch._waited(wait)
    report = watch.report()
    assert report["first_wait"] == 5.0
    assert report["wait_seconds"] == pytest.approx(0.298)
    assert report["wait_p50"] == pytest.approx(0.001, rel=0.07)
    assert report["wait_p99"] == pytest.approx(0.001, rel=0.07)
    assert watch.quantile(1.0) == pytest.approx(0.1, rel=0.07)
    assert KINDS[0] == "image"
