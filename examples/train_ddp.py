"""Train with DDP on packed jpg+cls shards: `torchrun --nproc-per-node 2 examples/train_ddp.py SHARDS_DIR`.

Make such shards with e.g.
`python -c "from shardstream_cli.demo.synth import make_jpegs; make_jpegs('raw', 200)"` and
`shardstream pack raw SHARDS_DIR --max-count 16`.

Every rank gets the same number of batches every epoch (no hang on the last step), a new shard order each
epoch, and the loader can be checkpointed and resumed mid-epoch with torchdata's StatefulDataLoader.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer import ShardDataset, collate


def main(shards: str, epochs: int = 2, checkpoint_path: str = "example-checkpoint.pt") -> None:
    dist.init_process_group("gloo")  # "nccl" on GPUs
    dataset = ShardDataset(shards, image="torch", image_size=64, fields=["jpg", "cls"], buffer_size=256)
    loader = StatefulDataLoader(dataset, batch_size=8, num_workers=2, collate_fn=collate)
    model = DistributedDataParallel(torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        for step, batch in enumerate(loader):
            images = batch["jpg"]  # a stacked uint8 tensor when sizes match, else a list of tensors
            means = torch.stack([img.float().mean(dim=(1, 2)) for img in images]) / 255
            loss = (model(means).squeeze(1) - batch["cls"].float()).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step == 0 and dist.get_rank() == 0:
                checkpoint = {"loader": loader.state_dict(), "model": model.state_dict()}
                torch.save(checkpoint, checkpoint_path)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {step + 1} batches per rank, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(
        *sys.argv[1:2] or ["shards"],
        checkpoint_path=sys.argv[2] if len(sys.argv) > 2 else "example-checkpoint.pt",
    )
