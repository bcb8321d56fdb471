"""Train with DDP on packed jpg+cls shards, checkpointing the loader so a run resumes on any world size.

    torchrun --nproc-per-node 2 examples/train_ddp.py SHARDS_DIR --checkpoint ckpt.pt
    torchrun --nproc-per-node 3 examples/train_ddp.py SHARDS_DIR --checkpoint ckpt.pt --resume

Make such shards with e.g.
`python -c "from shardstream_cli.demo.synth import make_jpegs; make_jpegs('raw', 200)"` and
`shardstream pack raw SHARDS_DIR --max-count 16`.

Every rank gets the same number of batches every epoch (no hang on the last step), a new shard order each
epoch, and the loader is checkpointed mid-epoch as the README's elastic recipe says: every rank's
StatefulDataLoader state, gathered, saved once by rank 0. Loaded whole into the dataset, that list continues
the epoch on any number of ranks and workers, each sample still read once.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer import ShardDataset, collate


def save_checkpoint(path: str, epoch: int, loader: StatefulDataLoader, model, optimizer) -> None:
    """Every rank's loader state, gathered (a collective: call it on every rank), saved once by rank 0."""
    states = [None] * dist.get_world_size()
    dist.all_gather_object(states, loader.state_dict())
    if dist.get_rank() == 0:
        checkpoint = {"epoch": epoch, "data": states, "model": model.state_dict()}
        torch.save({**checkpoint, "optimizer": optimizer.state_dict()}, path)


def main(args: argparse.Namespace) -> None:
    dist.init_process_group("gloo")  # "nccl" on GPUs
    rank = dist.get_rank()
    dataset = ShardDataset(args.shards, image="torch", image_size=64, fields=["jpg", "cls"], seed=5)
    model = DistributedDataParallel(torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    first_epoch = 0
    if args.resume:  # any world size and workers: the list holds every old rank's state
        checkpoint = torch.load(args.checkpoint, weights_only=True)
        first_epoch = checkpoint["epoch"]
        dataset.set_epoch(first_epoch)
        dataset.load_state_dict(checkpoint["data"])  # into the dataset, before the loader starts
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    loader = StatefulDataLoader(dataset, batch_size=8, num_workers=args.workers, collate_fn=collate)
    steps, seen = 0, {}
    for epoch in range(first_epoch, args.epochs):
        dataset.set_epoch(epoch)
        batches, loss = 0, torch.tensor(float("nan"))  # nan: a resumed epoch may have nothing left
        for batch in loader:
            images = batch["jpg"]  # a stacked uint8 tensor when sizes match, else a list of tensors
            means = torch.stack([img.float().mean(dim=(1, 2)) for img in images]) / 255
            loss = (model(means).squeeze(1) - batch["cls"].float()).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps, batches = steps + 1, batches + 1
            seen.setdefault(epoch, []).extend(batch["__key__"])
            if steps % args.checkpoint_every == 0:
                save_checkpoint(args.checkpoint, epoch, loader, model, optimizer)
            if steps == args.stop_after:
                break
        if rank == 0:
            print(f"epoch {epoch}: {batches} batches per rank, loss {loss.item():.4f}")
        if steps == args.stop_after:
            break
    if args.keys_out:  # what this rank trained on, per epoch (the tests check it)
        Path(args.keys_out, f"rank-{rank}.json").write_text(json.dumps(seen))
    dist.barrier()  # no rank leaves while a peer may still be receiving from it
    dist.destroy_process_group()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("shards", nargs="?", default="shards", help="a packed folder (or its index)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    parser.add_argument("--checkpoint", default="example-checkpoint.pt", help="where checkpoints go")
    parser.add_argument("--checkpoint-every", type=int, default=2, help="steps between checkpoints")
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    parser.add_argument("--stop-after", type=int, help="stop after this many steps (as if preempted)")
    parser.add_argument("--keys-out", help="a folder for each rank's trained sample keys")
    return parser.parse_args()


if __name__ == "__main__":
    main(parse_args())
