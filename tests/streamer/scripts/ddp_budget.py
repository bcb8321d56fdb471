"""One torchrun rank: token-budgeted batches of a skewed set through DataLoader workers into DDP (gloo).

Two epochs; in the second it stops after STOP steps and saves its loader's state, and a fresh dataset
and loader on the same world size and workers read the rest, training on. Writes every step's keys and
costs to OUT/rank-N.json; a rank with one batch more than the others would hang the all-reduce and
leave its file out.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from ddp_step import make_model, train_step  # beside this script

from streamer import ShardDataset, StatefulLoader

BUDGET, WORKERS, STOP = 600, 2, 5


def costs_of(batch):
    return [s["__key__"] for s in batch], torch.tensor([float(s["__cost__"]) for s in batch])


def loader_of(index: str, epoch: int) -> StatefulLoader:
    ds = ShardDataset(index, batch_tokens=BUDGET, buffer_size=16, seed=5, decode=False)
    ds.set_epoch(epoch)
    return StatefulLoader(ds, batch_size=None, num_workers=WORKERS, collate_fn=costs_of)


def main() -> None:
    index, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, optimizer = make_model()
    result = {"rank": rank, "epochs": []}
    for epoch in range(2):
        loader, steps = loader_of(index, epoch), []
        for keys, costs in loader:
            train_step(model, optimizer, costs)
            steps.append({"keys": keys, "cost": float(costs.sum())})
            if epoch == 1 and len(steps) == STOP:
                break
        if epoch == 1:  # a restart: a fresh dataset and loader continue from the saved state
            state = loader.state_dict()
            loader = loader_of(index, epoch)
            loader.load_state_dict(state)
            for keys, costs in loader:
                train_step(model, optimizer, costs)
                steps.append({"keys": keys, "cost": float(costs.sum()), "resumed": True})
        result["epochs"].append(steps)
    dist.barrier()
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as handle:
        json.dump(result, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
