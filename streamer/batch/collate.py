"""Batching decoded samples whose media differ in size: stack what lines up, list or pad the rest.

``collate`` decides per key, from the values in that batch:

* tensors, or numeric ndarrays, all of one shape and dtype -> one stacked tensor (ndarrays become tensors);
  differing shapes or dtypes -> a list of the values as they were (variable-size images, audio, video);
* all ints (or bools) -> an int64 (bool) tensor; ints and floats -> a float64 tensor, as torch's
  ``default_collate`` does;
* tuples of one length -> a tuple collated position by position, so ``(waveform, rate)`` audio becomes
  ``(stacked-or-list waveforms, int64 tensor of rates)``;
* anything else (str, bytes, dict, list, None, PIL images, mixed types) -> a list.

So the type of a key's batch can change from batch to batch when shapes happen to agree; ``pad_collate``
gives a fixed type for the keys it is told to pad. A key missing from some samples raises ``KeyError``
(filling ``None`` would hand a training loop holes it did not ask for); decode with ``fields=`` to keep
only the members every sample has, alternatives under one name (``{"image": "jpg;png"}``): the batch then
holds ``batch["image"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Number
from typing import Any, NamedTuple

import numpy as np
import torch

__all__ = ["Padded", "collate", "pad_collate"]

_NUMERIC_KINDS = "biufc"  # bool, int, uint, float, complex: the ndarray kinds torch.from_numpy takes


class Padded(NamedTuple):
    """Variable-length tensors padded at the end of one dim; ``lengths[i]`` is sample i's true length.

    ``data``: the batch's tensors stacked, each padded (with ``pad_collate``'s ``pad_value``) to the
    longest along that dim; ``lengths``: an int64 tensor of each sample's length there, before padding.
    """

    data: torch.Tensor
    lengths: torch.Tensor


def collate(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {key: _collate_values(values) for key, values in _columns(samples).items()}


def pad_collate(
    samples: Sequence[dict[str, Any]], *, dims: Mapping[str, int], pad_value: float = 0
) -> dict[str, Any]:
    """``collate``, but each key in ``dims`` is padded along that dim into a ``Padded`` (always, for a
    fixed type); e.g. ``dims={"wav": -1, "mp4": 0}`` for audio [C, T] and video [T, C, H, W].

    For ``(waveform, rate)`` tuples the tensors inside are padded. Every other dim must agree.
    Use ``functools.partial(pad_collate, dims=...)`` as a DataLoader's ``collate_fn``.
    """
    if not isinstance(dims, Mapping) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in dims.values()
    ):
        raise ValueError(f"dims must map keys to a dim index, like {{'wav': -1}}, not {dims!r}")
    if isinstance(pad_value, bool) or not isinstance(pad_value, Number):
        raise ValueError(f"pad_value must be a number, not {pad_value!r}")
    columns = _columns(samples)
    for key in dims:
        if key not in columns:
            raise KeyError(f"dims names {key!r}, which the samples do not have (they have {sorted(columns)})")
    return {
        key: _pad_values(key, values, dims[key], pad_value) if key in dims else _collate_values(values)
        for key, values in columns.items()
    }


def _columns(samples: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    if isinstance(samples, (str, bytes, Mapping)) or not isinstance(samples, Sequence) or not samples:
        raise ValueError(f"samples must be a non-empty list of sample dicts, not {type(samples).__name__}")
    keys = list(samples[0])
    columns: dict[str, list[Any]] = {key: [] for key in keys}
    for sample in samples:
        if sample.keys() != columns.keys():
            odd = sorted(columns.keys() ^ sample.keys())[0]
            raise KeyError(
                f"key {odd!r} is in some samples of the batch but not in others (sample "
                f"{sample.get('__key__')!r} vs {samples[0].get('__key__')!r}); decode with fields= to keep "
                "only the members every sample has, alternatives under one name: "
                "fields={'image': 'jpg;png;webp', 'meta': 'json'}"
            )
        for key in keys:
            columns[key].append(sample[key])
    return columns


def _collate_values(values: list[Any]) -> Any:
    first = values[0]
    if isinstance(first, torch.Tensor):
        if all(
            isinstance(v, torch.Tensor) and v.shape == first.shape and v.dtype == first.dtype for v in values
        ):
            return torch.stack(values)
        return values
    if isinstance(first, (np.ndarray, np.generic)) and first.dtype.kind in _NUMERIC_KINDS:
        if all(
            isinstance(v, (np.ndarray, np.generic)) and v.shape == first.shape and v.dtype == first.dtype
            for v in values
        ):
            return torch.from_numpy(np.stack(values))
        return values
    if all(isinstance(v, bool) for v in values):
        return torch.tensor(values, dtype=torch.bool)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return torch.tensor(values, dtype=torch.int64)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return torch.tensor(values, dtype=torch.float64)
    if isinstance(first, tuple) and all(isinstance(v, tuple) and len(v) == len(first) for v in values):
        return tuple(_collate_values(list(column)) for column in zip(*values, strict=True))
    return values


def _pad_values(key: str, values: list[Any], dim: int, pad_value: float) -> Any:
    first = values[0]
    if isinstance(first, tuple) and all(isinstance(v, tuple) and len(v) == len(first) for v in values):
        return tuple(
            _pad_values(key, list(column), dim, pad_value)
            if _is_array(column[0])
            else _collate_values(list(column))
            for column in zip(*values, strict=True)
        )
    if not all(_is_array(v) for v in values):
        raise ValueError(f"{key!r} is padded (dims), so it must hold tensors or ndarrays in every sample")
    tensors = [torch.from_numpy(np.asarray(v)) if not isinstance(v, torch.Tensor) else v for v in values]
    ndim, dtype = tensors[0].ndim, tensors[0].dtype
    if not -ndim <= dim < ndim:
        raise ValueError(f"dims[{key!r}] is {dim}, but {key!r} has {ndim} dims")
    dim %= ndim
    shapes = [tuple(t.shape) for t in tensors]
    rest = {s[:dim] + s[dim + 1 :] for s in shapes}
    if len(rest) != 1 or any(t.ndim != ndim or t.dtype != dtype for t in tensors):
        raise ValueError(
            f"{key!r} can only be padded along dim {dim}: its other dims and dtype must agree, got shapes "
            f"{shapes} and dtypes {sorted({str(t.dtype) for t in tensors})}"
        )
    lengths = torch.tensor([s[dim] for s in shapes], dtype=torch.int64)
    out_shape = list(shapes[0])
    out_shape[dim] = int(lengths.max())
    out = torch.full((len(tensors), *out_shape), pad_value, dtype=dtype)
    for row, tensor in zip(out, tensors, strict=True):
        row.narrow(dim, 0, tensor.shape[dim]).copy_(tensor)
    return Padded(out, lengths)


def _is_array(value: Any) -> bool:
    return isinstance(value, torch.Tensor) or (
        isinstance(value, np.ndarray) and value.dtype.kind in _NUMERIC_KINDS
    )
