"""Token budgets under real torchrun jobs (issue 34, acceptance 2): 3 ranks x 2 workers, DDP (gloo), a
skewed cost spread; every rank takes the same steps in every epoch, through a checkpoint mid-epoch
restored on the same topology and, elastically, on 2 ranks x 3 workers; nothing trained on twice."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np

from packer import PackOptions, pack
from tests.streamer.datasets.test_torchrun import _torchrun_command

SCRIPT = Path(__file__).parents[1] / "scripts" / "ddp_budget.py"
BUDGET, STOP = 600, 5  # as the script has them


def _run(ranks: int, shards: Path, out: Path, phase: str, workers: int) -> list[dict]:
    command = _torchrun_command(ranks, str(SCRIPT), str(shards), str(out), phase, str(workers))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads((out / f"{phase}-rank-{r}.json").read_text()) for r in range(ranks)]


def test_torchrun_3x2_budgeted_steps_equal_through_a_checkpoint_and_an_elastic_restore_on_2x3(tmp_path):
    rng = np.random.default_rng(1)
    costs = np.minimum(np.exp(rng.normal(np.log(50), 1.2, 900)), 2000).astype(int) + 1
    records = [{"id": f"k{i:04d}", "txt": "t", "n": int(c)} for i, c in enumerate(costs)]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pack(tmp_path / "m.jsonl", tmp_path / "shards", PackOptions(cost="n", max_count=70))
    out = tmp_path / "out"
    out.mkdir()
    first = _run(3, tmp_path / "shards", out, "first", 2)
    kept = int((costs <= BUDGET).sum())
    for epoch in range(2):
        steps = {len(r["epochs"][epoch]) for r in first}
        assert len(steps) == 1, f"epoch {epoch}: steps differ across ranks: {steps}"
        seen = Counter(k for r in first for step in r["epochs"][epoch] for k in step["keys"])
        assert max(seen.values()) == 1  # through the same-topology checkpoint too
        assert all(step["cost"] <= BUDGET for r in first for step in r["epochs"][epoch])
        assert len(seen) >= 0.99 * kept  # what is left over is small (and counted in ds.errors)
    second = _run(2, tmp_path / "shards", out, "second", 3)
    assert len({len(r["epochs"][0]) for r in second}) == 1  # equal steps on the new topology
    before = Counter(k for r in first for step in r["epochs"][1][:STOP] for k in step["keys"])
    after = Counter(k for r in second for step in r["epochs"][0] for k in step["keys"])
    assert max((before + after).values()) == 1  # the elastic rest: nothing twice in the epoch
    assert len(before) + len(after) >= 0.99 * kept
    assert all(step["cost"] <= BUDGET for r in second for step in r["epochs"][0])
