"""The statistics exports (streamer/stats/export.py): JSON lines read back from the file, a real Prometheus
scrape over HTTP, TensorBoard event files read back with tensorboard's own reader; a failing snapshot is
logged and the export goes on; a missing extra names it."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time

import pytest
import urllib3

from streamer.stats.export import (
    JsonLinesExporter,
    PrometheusExporter,
    TensorBoardExporter,
    export,
    flatten,
)

TICK = 0.05


def worker_stats(n: int, scale: float) -> dict:
    """One worker's numbers in the ds.stats() schema, growing with ``n`` (the call number)."""
    return {
        "seconds": {"open": 0.1 * scale, "io": 2.0 * scale + n, "decode": 3.0 * scale, "idle": 1.0},
        "decode": {"image": 2.5 * scale + n, "text": 0.5},
        "counts": {"samples": 1000 * (n + 1), "shards": 3, "bytes": 123456, "retries": 0},
        "fill_seconds": 0.4,
        "wall": 7.0 + n,
    }


class Snapshots:
    """A snapshot callable whose numbers change on every call (a live loader's stats, in miniature)."""

    def __init__(self, fail_on: set[int] | frozenset[int] = frozenset(), steps: bool = False) -> None:
        self.calls = 0
        self.fail_on = set(fail_on)
        self.steps = steps
        self.lock = threading.Lock()

    def __call__(self) -> dict:
        with self.lock:
            n = self.calls
            self.calls += 1
        if n in self.fail_on:
            raise RuntimeError(f"stats unavailable on call {n}")
        code = "decode-bound" if n < 2 else "io-bound"
        snap = {
            "workers": {"main": worker_stats(n, 0.5), "0": worker_stats(n, 1.0), "1": worker_stats(n, 2.0)},
            "total": {"seconds": {"io": 10.0 + n}, "counts": {"samples": 3000 * (n + 1)}, "wall": 14.0},
            "verdict": {"code": code, "text": f"workers are {code}"},
        }
        if self.steps:
            snap["trainer"] = {"steps": 10 * (n + 1), "exposed": 0.42, "wait_p99": 0.2}
        return snap


def wait_until(check, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the exporter")
        time.sleep(0.01)


def read_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_flatten_names_numeric_leaves_by_dotted_path_and_drops_strings():
    flat = flatten(Snapshots(steps=True)())
    assert flat["workers.0.seconds.io"] == 2.0
    assert flat["workers.main.counts.samples"] == 1000.0
    assert flat["trainer.steps"] == 10.0
    assert not any(name.startswith("verdict") for name in flat)
    assert all(isinstance(value, float) for value in flat.values())


def test_json_lines_parse_and_show_the_values_changing(tmp_path):
    path = tmp_path / "stats.jsonl"
    with JsonLinesExporter(path, Snapshots(), every=TICK):
        wait_until(lambda: path.exists() and path.read_text().count("\n") >= 3)
    lines = read_lines(path)
    assert len(lines) >= 4  # three ticks and the last line on close
    ios = [line["workers"]["0"]["seconds"]["io"] for line in lines]
    assert ios == sorted(ios) and len(set(ios)) == len(ios)
    assert lines[0]["verdict"]["code"] == "decode-bound" and lines[-1]["verdict"]["code"] == "io-bound"
    assert all(abs(line["time"] - time.time()) < 60 for line in lines)
    elapsed = [line["elapsed"] for line in lines]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0


def test_json_lines_append_and_close_twice_is_fine(tmp_path):
    path = tmp_path / "stats.jsonl"
    path.write_text('{"earlier": 1}\n')
    exporter = JsonLinesExporter(path, Snapshots(), every=60)
    exporter.close()
    exporter.close()
    lines = read_lines(path)
    assert lines[0] == {"earlier": 1} and len(lines) == 2  # one last line on close, appended


def test_json_lines_keep_going_after_a_snapshot_raises(tmp_path, caplog):
    path = tmp_path / "stats.jsonl"
    snapshots = Snapshots(fail_on={0, 2})
    with (
        caplog.at_level(logging.WARNING, logger="shardstream"),
        JsonLinesExporter(path, snapshots, every=TICK),
    ):
        wait_until(lambda: path.exists() and path.read_text().count("\n") >= 3)
    logged = [r for r in caplog.records if r.name == "shardstream" and "stats unavailable" in r.getMessage()]
    assert len(logged) == 1, "a failing snapshot is logged once, not on every tick"
    assert str(path) in logged[0].getMessage()
    assert len(read_lines(path)) >= 3


def test_json_lines_refuse_a_missing_folder_and_bad_every(tmp_path):
    with pytest.raises(ValueError, match="path"):
        JsonLinesExporter(tmp_path / "absent" / "stats.jsonl", Snapshots())
    with pytest.raises(ValueError, match="every"):
        JsonLinesExporter(tmp_path / "stats.jsonl", Snapshots(), every=0)


def scrape(port: int) -> str:
    response = urllib3.request("GET", f"http://127.0.0.1:{port}/metrics", timeout=5.0)
    assert response.status == 200
    return response.data.decode()


def sample(body: str, metric: str, /, **labels: str) -> float:
    """The value of one series in a Prometheus text exposition (labels in any order)."""
    for line in body.splitlines():
        if not line.startswith(metric + "{"):
            continue
        head, value = line.rsplit(" ", 1)
        found = dict(part.split("=", 1) for part in head[len(metric) + 1 : -1].split(","))
        if {k: v.strip('"') for k, v in found.items()} == labels:
            return float(value)
    raise AssertionError(f"no {metric}{labels} in the scrape:\n{body}")


def test_prometheus_scrape_shows_the_labelled_metrics_and_their_current_values():
    snapshots = Snapshots(steps=True)
    with PrometheusExporter(snapshots, port=0) as exporter:
        first = scrape(exporter.port)
        second = scrape(exporter.port)
    assert sample(first, "shardstream_seconds", worker="0", stage="io") == 2.0
    assert sample(first, "shardstream_seconds", worker="main", stage="open") == 0.05
    assert sample(first, "shardstream_decode_seconds", worker="1", kind="image") == 5.0
    assert sample(first, "shardstream_count", worker="0", name="samples") == 1000
    assert sample(first, "shardstream_fill_seconds", worker="1") == 0.4
    assert sample(first, "shardstream_wall_seconds", worker="0") == 7.0
    assert sample(first, "shardstream_trainer", name="exposed") == 0.42
    assert sample(first, "shardstream_verdict", code="decode-bound") == 1
    # The second scrape reads the snapshot anew: the values it shows are the loader's at that moment.
    assert sample(second, "shardstream_seconds", worker="0", stage="io") == 3.0
    assert sample(second, "shardstream_count", worker="0", name="samples") == 2000
    assert sample(second, "shardstream_trainer", name="steps") == 20
    assert 'worker="total"' not in first  # sums over workers would count it twice


def test_prometheus_two_exporters_do_not_clash_and_close_twice_is_fine():
    first = PrometheusExporter(Snapshots())
    second = PrometheusExporter(Snapshots())
    try:
        assert first.port != second.port
        assert sample(scrape(first.port), "shardstream_seconds", worker="0", stage="io") == 2.0
        assert sample(scrape(second.port), "shardstream_seconds", worker="0", stage="io") == 2.0
    finally:
        first.close()
        second.close()
    first.close()
    with pytest.raises(urllib3.exceptions.HTTPError):
        urllib3.request("GET", f"http://127.0.0.1:{first.port}/metrics", timeout=1.0, retries=False)


def test_prometheus_a_failing_snapshot_is_logged_and_the_next_scrape_works(caplog):
    with (
        caplog.at_level(logging.WARNING, logger="shardstream"),
        PrometheusExporter(Snapshots(fail_on={0})) as exporter,
    ):
        assert "shardstream_seconds" not in scrape(exporter.port)
        assert sample(scrape(exporter.port), "shardstream_seconds", worker="0", stage="io") == 3.0
    assert any("stats unavailable" in r.getMessage() for r in caplog.records if r.name == "shardstream")


def test_prometheus_refuses_a_port_out_of_range():
    with pytest.raises(ValueError, match="port"):
        PrometheusExporter(Snapshots(), port=70000)


def test_tensorboard_scalars_read_back_with_their_steps(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log_dir = tmp_path / "tb"
    snapshots = Snapshots()
    exporter = TensorBoardExporter(log_dir, snapshots, every=TICK)
    wait_until(lambda: snapshots.calls >= 3)
    exporter.close()
    exporter.close()
    events = EventAccumulator(str(log_dir)).Reload()
    io = events.Scalars("workers/0/seconds/io")
    assert [e.step for e in io] == list(range(len(io))) and len(io) >= 4
    assert [e.value for e in io] == [2.0 + step for step in range(len(io))]
    assert events.Scalars("total/counts/samples")[1].value == 6000
    assert "verdict/code" not in events.Tags()["scalars"]
    texts = events.Tensors("verdict/text_summary")
    assert [t.step for t in texts] == [0, 2], "the verdict is written when it changes"


def test_tensorboard_steps_follow_the_trainer_when_it_counts_them(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log_dir = tmp_path / "tb"
    with TensorBoardExporter(log_dir, Snapshots(steps=True), every=60):
        pass
    steps = [e.step for e in EventAccumulator(str(log_dir)).Reload().Scalars("trainer/exposed")]
    assert steps == [10]


def test_export_starts_only_what_is_asked_and_closes_it_all(tmp_path):
    path = tmp_path / "stats.jsonl"
    with export(Snapshots(), json_lines=path, prometheus_port=0, every=TICK) as exports:
        assert exports.tensorboard is None
        assert sample(scrape(exports.prometheus.port), "shardstream_count", worker="0", name="shards") == 3
        wait_until(lambda: path.exists() and path.read_text().count("\n") >= 1)
    exports.close()
    assert not any(t.name.startswith("shardstream-export") for t in threading.enumerate())
    assert len(read_lines(path)) >= 2


@pytest.mark.parametrize(
    ("arguments", "named"),
    [({"every": 0}, "every"), ({"every": -1.0}, "every"), ({"prometheus_port": 65536}, "prometheus_port")],
)
def test_export_refuses_bad_values_naming_the_argument(tmp_path, arguments, named):
    with pytest.raises(ValueError, match=named):
        export(Snapshots(), json_lines=tmp_path / "stats.jsonl", **arguments)
    assert not (tmp_path / "stats.jsonl").exists(), "nothing is started before every value is checked"


@pytest.mark.parametrize(
    ("blocked", "start"),
    [
        ("prometheus_client", "PrometheusExporter(dict)"),
        ("tensorboard", "TensorBoardExporter(sys.argv[1], dict)"),
    ],
)
def test_a_missing_extra_names_it(tmp_path, blocked, start):
    # sys.modules[name] = None makes `import name` fail as it does where the package is not installed.
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from streamer.stats.export import PrometheusExporter, TensorBoardExporter\n"
        f"{start}\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode != 0
    assert "ImportError" in run.stderr and "pip install 'shardstream[export]'" in run.stderr, run.stderr
