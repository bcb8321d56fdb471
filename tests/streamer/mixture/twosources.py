"""What the schedule and change tests share: two sources, code (2 shards of 400) and web (3 of 500), mixed
960 samples an epoch in batches of ``B`` through StatefulDataLoaders, and a loader stopped mid-epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchdata.stateful_dataloader import StatefulDataLoader

from streamer.mixture.mixture import Mixture
from tests.conftest import write_dataset

B = 8


def write_two(root: Path) -> dict[str, Path]:
    return {
        "code": write_dataset(root / "code", [400, 400], prefix="code").parent,
        "web": write_dataset(root / "web", [500, 500, 500], prefix="web").parent,
    }


def keys(batch: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(sample["__source__"], sample["__key__"]) for sample in batch]


def two_mixture(two: dict[str, Path], code: Any, web: Any, **options: Any) -> Mixture:
    """code and web at these weights (numbers or schedules); ``options`` override the defaults."""
    sources = [
        {"path": str(two["code"]), "name": "code", "weight": code, "decode": False},
        {"path": str(two["web"]), "name": "web", "weight": web, "decode": False},
    ]
    return Mixture(sources, **{"epoch_size": 960, "batch_size": B, "buffer_size": 64, **options})


def stateful(mixture: Mixture, workers: int = 2) -> StatefulDataLoader:
    return StatefulDataLoader(mixture, batch_size=B, num_workers=workers, collate_fn=keys)


def stopped(loader: StatefulDataLoader, batches: int) -> tuple[list[Any], dict[str, Any]]:
    """The loader's first ``batches`` batches and its state after them."""
    running = iter(loader)
    head = [next(running) for _ in range(batches)]
    return head, loader.state_dict()
