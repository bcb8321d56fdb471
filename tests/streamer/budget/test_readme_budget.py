"""The README's token-budget example, run verbatim (its dataset path replaced) on a set packed with costs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from packer import PackOptions, pack

README = Path(__file__).resolve().parents[3] / "README.md"
DATASET = '"shards/"'


def test_the_readme_budget_example_runs(tmp_path):
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Token budgets") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert code.count(DATASET) == 1
    records = [{"id": f"r{i:04d}", "txt": "t", "num_tokens": 100 + 37 * i % 3000} for i in range(400)]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    pack(tmp_path / "m.jsonl", tmp_path / "shards", PackOptions(cost="num_tokens", max_count=50))
    namespace: dict = {"__name__": "readme_budget"}
    exec(compile(code.replace(DATASET, repr(str(tmp_path / "shards"))), str(README), "exec"), namespace)
    batch = namespace["batch"]  # the last batch
    assert isinstance(batch, list) and sum(s["__cost__"] for s in batch) <= 8192
    item = namespace["item"]  # the last packed item: the same batch, with its boundaries
    costs = [s["__cost__"] for s in item["samples"]]
    assert item["cu_seqlens"].tolist()[1:] == [sum(costs[: i + 1]) for i in range(len(costs))]
