"""What both torchrun scripts train: a one-weight DDP model on each batch's labels, keys carried alongside."""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel


def collate(samples):
    return [s["__key__"] for s in samples], torch.tensor([float(s["cls"]) for s in samples])


def make_model() -> tuple[DistributedDataParallel, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(
    model: DistributedDataParallel, optimizer: torch.optim.Optimizer, labels: torch.Tensor
) -> None:
    loss = (model(labels[:, None]) - labels[:, None]).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()  # all-reduces across ranks: an extra batch on one rank would hang here
    optimizer.step()
