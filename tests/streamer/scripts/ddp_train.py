"""One torchrun rank: stream an uneven dataset with DataLoader workers into a DDP (gloo) training loop.

Writes the keys it trained on and its batch count to OUT/rank-N.json; a hang would leave the file out.
"""

from __future__ import annotations

import json
import os
import sys

import torch.distributed as dist
from ddp_step import collate, make_model, train_step  # beside this script
from torch.utils.data import DataLoader

from streamer import ShardDataset


def main() -> None:
    index, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, optimizer = make_model()
    ds = ShardDataset(index, fields=["cls"], buffer_size=16, seed=5)
    loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=collate)
    result = {"rank": rank, "len": len(ds), "epochs": []}
    for epoch in range(2):
        ds.set_epoch(epoch)
        keys, batches = [], 0
        for batch_keys, labels in loader:
            train_step(model, optimizer, labels)
            keys += batch_keys
            batches += 1
        result["epochs"].append({"keys": keys, "batches": batches})
    dist.barrier()
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as handle:
        json.dump(result, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
