"""One torchrun rank: stream an uneven dataset with DataLoader workers into a DDP (gloo) training loop.

Writes the keys it trained on and its batch count to OUT/rank-N.json; a hang would leave the file out.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from streamer import ShardDataset


def _collate(samples):
    return [s["__key__"] for s in samples], torch.tensor([float(s["cls"]) for s in samples])


def main() -> None:
    index, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = ShardDataset(index, fields=["cls"], buffer_size=16, seed=5)
    loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=_collate)
    result = {"rank": rank, "len": len(ds), "epochs": []}
    for epoch in range(2):
        ds.set_epoch(epoch)
        keys, batches = [], 0
        for batch_keys, labels in loader:
            loss = (model(labels[:, None]) - labels[:, None]).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()  # all-reduces across ranks: an extra batch on one rank would hang here
            optimizer.step()
            keys += batch_keys
            batches += 1
        result["epochs"].append({"keys": keys, "batches": batches})
    dist.barrier()
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as handle:
        json.dump(result, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
