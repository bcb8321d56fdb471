"""A budgeted batch for varlen attention: its samples with ``cu_seqlens`` and ``max_seqlen``, from costs.

Packed attention kernels (FlashAttention's varlen functions, PyTorch's nested jagged tensors) take the
concatenated sequences and the boundaries between them: ``cu_seqlens``, an int32 tensor of running
lengths starting at 0, and the longest length. A ``batching="pack"`` batch already carries each sample's
length as its ``__cost__`` (tokens, when the cost column counts them), so the boundaries come without
looking inside a sample; the concatenation stays the user's (only they know how a sample tokenizes).
Trade-off: the boundaries are the costs as packed, so a cost column that is an estimate gives
boundaries of the estimate, not of the tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def cu_seqlens(batch: Sequence[Any]) -> torch.Tensor:
    """``[0, c0, c0 + c1, ...]`` over the batch's ``__cost__`` values, int32 (what varlen kernels take).

    ValueError naming the sample when one carries no integer ``__cost__`` (a ``decode=fn`` that returned
    something other than the sample's dict)."""
    lengths = [_cost(sample, i) for i, sample in enumerate(batch)]
    out = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    if lengths:  # summed in int64, then checked to fit int32
        running = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), 0)
        if int(running[-1]) > torch.iinfo(torch.int32).max:
            raise ValueError(f"the batch's costs sum to {int(running[-1])}, past what int32 cu_seqlens hold")
        out[1:] = running.to(torch.int32)
    return out


def pack_collate(batch: Sequence[Any]) -> dict[str, Any]:
    """A budgeted batch as ``{"samples": [...], "cu_seqlens": int32 tensor, "max_seqlen": int}``: the
    ``collate_fn`` for ``DataLoader(ds, batch_size=None, collate_fn=pack_collate)``."""
    bounds = cu_seqlens(batch)
    longest = int((bounds[1:] - bounds[:-1]).max()) if len(batch) else 0
    return {"samples": list(batch), "cu_seqlens": bounds, "max_seqlen": longest}


def _cost(sample: Any, position: int) -> int:
    cost = sample.get("__cost__") if isinstance(sample, dict) else None
    if isinstance(cost, bool) or not isinstance(cost, int):
        key = sample.get("__key__") if isinstance(sample, dict) else None
        raise ValueError(
            f"sample {position} of the batch ({key or type(sample).__name__}) has no integer __cost__: "
            "cu_seqlens needs a batch_tokens dataset's samples as dicts (a decode= function must keep "
            "the sample's dict and its __cost__)"
        )
    return cost
