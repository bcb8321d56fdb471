"""One torchrun rank: token-budgeted batches of a skewed set through DataLoader workers into DDP (gloo).

``first``: epoch 0 whole; epoch 1 until STOP steps, then a checkpoint of the loader (same topology) read
on by a fresh dataset and loader to the epoch's end, and the gathered states of every rank at STOP saved
to OUT/states.pt. ``second`` (any other world size and workers): those states loaded into a fresh
dataset (an elastic restore), epoch 1's rest read. Each rank writes its steps' keys and costs to
OUT/PHASE-rank-N.json; a rank with one batch more than the others would hang the all-reduce.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from ddp_step import make_model, train_step  # beside this script

from streamer import ShardDataset, StatefulLoader

BUDGET, STOP = 600, 5


def costs_of(batch):
    return [s["__key__"] for s in batch], torch.tensor([float(s["__cost__"]) for s in batch])


def dataset(index: str, epoch: int) -> ShardDataset:
    ds = ShardDataset(index, batch_tokens=BUDGET, buffer_size=16, seed=5, decode=False)
    ds.set_epoch(epoch)
    return ds


def train(model, optimizer, loader, steps, stop=None, **mark):
    for keys, costs in loader:
        train_step(model, optimizer, costs)
        steps.append({"keys": keys, "cost": float(costs.sum()), **mark})
        if stop is not None and len(steps) == stop:
            return


def main() -> None:
    index, out, phase, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, optimizer = make_model()
    result = {"rank": rank, "epochs": []}
    if phase == "first":
        steps: list = []
        train(
            model,
            optimizer,
            StatefulLoader(dataset(index, 0), batch_size=None, num_workers=workers, collate_fn=costs_of),
            steps,
        )
        result["epochs"].append(steps)
        steps = []
        loader = StatefulLoader(dataset(index, 1), batch_size=None, num_workers=workers, collate_fn=costs_of)
        train(model, optimizer, loader, steps, stop=STOP)
        state = loader.state_dict()
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, state)
        if rank == 0:
            torch.save(gathered, os.path.join(out, "states.pt"))
        loader = StatefulLoader(dataset(index, 1), batch_size=None, num_workers=workers, collate_fn=costs_of)
        loader.load_state_dict(state)  # the same topology: batch for batch where it stopped
        train(model, optimizer, loader, steps, resumed=True)
        result["epochs"].append(steps)
    else:
        ds = dataset(index, 1)
        ds.load_state_dict(torch.load(os.path.join(out, "states.pt"), weights_only=False))
        steps = []
        train(
            model,
            optimizer,
            StatefulLoader(ds, batch_size=None, num_workers=workers, collate_fn=costs_of),
            steps,
            elastic=True,
        )
        result["epochs"].append(steps)
    dist.barrier()
    with open(os.path.join(out, f"{phase}-rank-{rank}.json"), "w") as handle:
        json.dump(result, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
