"""Run a StatefulDataLoader over a dataset: all of it, stop after K batches and save, or resume from a save.

Each mode prints the keys it yielded as one JSON list per batch, so tests compare real process runs.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer import ShardDataset


def _keys(batch):
    return [sample["__key__"] for sample in batch]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("index")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epoch", type=int, default=0)
    parser.add_argument("--stop-after", type=int, default=None)
    parser.add_argument("--save", default=None)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--context", default=None, help="DataLoader worker start method")
    args = parser.parse_args()
    ds = ShardDataset(args.index, decode=False, buffer_size=32, seed=17, rank=1, world_size=2)
    ds.set_epoch(args.epoch)
    context = args.context if args.workers else None
    loader = StatefulDataLoader(
        ds, batch_size=5, num_workers=args.workers, collate_fn=_keys, multiprocessing_context=context
    )
    if args.resume:
        loader.load_state_dict(torch.load(args.resume, weights_only=False))
    out = []
    for n, batch in enumerate(loader):
        out.append(batch)
        if args.stop_after is not None and n + 1 == args.stop_after:
            torch.save(loader.state_dict(), args.save)
            break
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
