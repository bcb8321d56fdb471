"""One torchrun rank of an elastic run: train on part of an epoch, checkpoint every rank's loader state
(gathered, the same file for all), or continue from such a checkpoint on however many ranks and workers.

    elastic_run.py INDEX OUT --workers K [--stop-after N --save CKPT] [--resume CKPT]

Writes the keys it trained on and its batch count to OUT/rank-N.json; a hang would leave the file out.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist
from ddp_step import collate, make_model, train_step  # beside this script
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer import ShardDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("index")
    parser.add_argument("out")
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--stop-after", type=int)
    parser.add_argument("--save")
    parser.add_argument("--resume")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, optimizer = make_model()
    ds = ShardDataset(args.index, fields=["cls"], buffer_size=16, seed=5)
    ds.set_epoch(1)
    if args.resume:  # every old rank's loader state, as the old run gathered and saved it
        ds.load_state_dict(torch.load(args.resume, weights_only=True))  # plain lists, dicts and ints
    loader = StatefulDataLoader(ds, batch_size=4, num_workers=args.workers, collate_fn=collate)
    keys, batches = [], 0
    for batch_keys, labels in loader:
        train_step(model, optimizer, labels)
        keys += batch_keys
        batches += 1
        if batches == args.stop_after:
            states = [None] * world
            dist.all_gather_object(states, loader.state_dict())
            if rank == 0:
                torch.save(states, args.save)
            break
    dist.barrier()
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as handle:
        json.dump({"rank": rank, "world": world, "keys": keys, "batches": batches}, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
