"""A real torchrun job: 3 ranks x 2 workers over 7 very uneven shards, DDP (gloo) trains without hanging."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.conftest import write_dataset

SCRIPT = Path(__file__).parents[1] / "scripts" / "ddp_train.py"
ELASTIC = Path(__file__).parents[1] / "scripts" / "elastic_run.py"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_ddp.py"
COUNTS = [97, 1, 0, 38, 5, 160, 12]  # fewer shards than ranks x workers would need to be whole
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun_command(ranks: int, *args: str) -> list[str]:
    """torchrun's command line: one node of RANKS processes meeting on a free local port, running ARGS."""
    meet = ["--master-addr", "127.0.0.1", "--master-port", str(_free_port())]
    return [*TORCHRUN, "--nproc-per-node", str(ranks), *meet, *args]


def test_torchrun_ddp_every_sample_once_equal_batches_no_hang(tmp_path):
    index = write_dataset(tmp_path / "data", COUNTS)
    out = tmp_path / "out"
    out.mkdir()
    command = _torchrun_command(3, str(SCRIPT), str(index), str(out))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    ranks = [json.loads((out / f"rank-{r}.json").read_text()) for r in range(3)]
    total = sum(COUNTS)
    for epoch in range(2):
        batches = {r["epochs"][epoch]["batches"] for r in ranks}
        assert len(batches) == 1, f"epoch {epoch}: batch counts differ across ranks: {batches}"
        seen = Counter(k for r in ranks for k in r["epochs"][epoch]["keys"])
        assert max(seen.values()) == 1
        assert total - len(seen) < 3
        assert all(len(r["epochs"][epoch]["keys"]) == r["len"] == total // 3 for r in ranks)
    first = {k for k in ranks[0]["epochs"][0]["keys"]}
    second = {k for k in ranks[0]["epochs"][1]["keys"]}
    assert first != second  # a new partition every epoch


def test_the_ddp_example_runs(tmp_path):
    from packer import PackOptions, pack
    from shardstream_cli.demo.synth import make_jpegs

    raw = make_jpegs(tmp_path / "raw", 60, size=(32, 32))
    pack(raw, tmp_path / "shards", PackOptions(max_count=7))
    command = _torchrun_command(
        2, str(EXAMPLE), str(tmp_path / "shards"), "--checkpoint", str(tmp_path / "ckpt.pt")
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "epoch 1: 4 batches per rank" in result.stdout
    assert (tmp_path / "ckpt.pt").exists()


def test_the_ddp_examples_checkpoint_saved_on_2x2_resumes_on_3x1_every_sample_once(tmp_path):
    """The example's checkpoint (the README's gather recipe) taken mid-epoch continues on another world."""
    from packer import PackOptions, pack
    from shardstream_cli.demo.synth import make_jpegs

    count = 96
    raw = make_jpegs(tmp_path / "raw", count, size=(16, 16))
    pack(raw, tmp_path / "shards", PackOptions(max_count=7))
    shards, ckpt = str(tmp_path / "shards"), str(tmp_path / "ckpt.pt")
    runs = []
    for n, (ranks, extra) in enumerate([(2, ["--stop-after", "3"]), (3, ["--workers", "1", "--resume"])]):
        out = tmp_path / f"keys-{n}"
        out.mkdir()
        args = ["--checkpoint", ckpt, "--checkpoint-every", "3", "--keys-out", str(out), *extra]
        _torchrun(ranks, str(EXAMPLE), shards, *args, cwd=tmp_path)  # what it writes stays in tmp_path
        runs.append([json.loads((out / f"rank-{r}.json").read_text()) for r in range(ranks)])
    saved, resumed = runs
    assert all(len(rank["0"]) == 3 * 8 for rank in saved)  # three batches of eight on each old rank
    first = Counter(k for run in runs for rank in run for k in rank.get("0", []))
    assert max(first.values()) == 1  # nothing of epoch 0 read twice across the save and the restore
    assert count - len(first) <= 3 - 1  # the restore's deal leaves out fewer than its world size
    assert len({len(rank["0"]) for rank in resumed}) == 1  # equal batches, so DDP did not hang
    second = Counter(k for rank in resumed for k in rank["1"])
    assert max(second.values()) == 1 and len(second) == count  # the next epoch is 3x1's own, whole


def _torchrun(ranks: int, *args: str, cwd: Path | None = None) -> None:
    command = _torchrun_command(ranks, *args)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=env, check=False, cwd=cwd
    )
    assert result.returncode == 0, result.stderr[-4000:]


def test_torchrun_elastic_restore_3x2_then_2x3_then_4x1_reads_the_epoch_once(tmp_path):
    counts = [97, 1, 0, 38, 5, 160, 12, 44]
    index = write_dataset(tmp_path / "data", counts)
    first, second = str(tmp_path / "ckpt-1.pt"), str(tmp_path / "ckpt-2.pt")
    steps = [
        (3, 2, ["--stop-after", "7", "--save", first]),
        (2, 3, ["--resume", first, "--stop-after", "9", "--save", second]),
        (4, 1, ["--resume", second]),
    ]
    runs = []
    for n, (ranks, workers, extra) in enumerate(steps):
        out = tmp_path / f"out-{n}"
        out.mkdir()
        _torchrun(ranks, str(ELASTIC), str(index), str(out), "--workers", str(workers), *extra)
        runs.append([json.loads((out / f"rank-{r}.json").read_text()) for r in range(ranks)])
    for run in runs:
        assert len({r["batches"] for r in run}) == 1  # equal batches on every rank, so DDP never hung
        assert len({len(r["keys"]) for r in run}) == 1
    assert runs[0][0]["batches"] == 7 and runs[1][0]["batches"] == 9 and runs[2][0]["batches"] > 0
    seen = Counter(k for run in runs for r in run for k in r["keys"])
    assert max(seen.values()) == 1  # nothing read twice across the three runs
    everything = {f"s{shard:03d}-{i:05d}" for shard, count in enumerate(counts) for i in range(count)}
    assert set(seen) <= everything
    # At most what the first epoch leaves out (total mod 3) and each restore's remainder (world - 1).
    assert len(everything) - len(seen) <= sum(counts) % 3 + (2 - 1) + (4 - 1)
