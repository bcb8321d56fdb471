"""A subset index: a small JSON naming a dataset and its sample masks; no shard is copied."""

# ``shardstream-subset.json`` in its own folder, beside ``shardstream-subset.masks`` (subsetmasks.py):
#   {"format": "shardstream-subset", "version": 1,
#    "dataset": the dataset's index, relative to this folder or an absolute path or URL,
#    "dataset_sha256": the sha256 of that index's bytes (a dataset packed again is refused, not misread),
#    "masks": the masks file's name beside this one, "masks_bytes": its size, "masks_sha256": its sha256,
#    "samples": the dataset's samples, "kept": the subset's, "rule": how it was chosen (for people: the
#    include/exclude files, the predicate, and what each left out; never read back)}
# The masks are published first and the JSON last, each by temp file and rename: a folder holds a whole
# subset or none.

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError
from ..io.publish import write_atomic
from .subsetmasks import encode_masks

SUBSET_FORMAT = "shardstream-subset"
SUBSET_VERSION = 1
SUBSET_NAME = "shardstream-subset.json"
MASKS_NAME = "shardstream-subset.masks"


@dataclass(frozen=True, kw_only=True)
class SubsetIndex:
    """What a subset's JSON says (see the layout above); ``rule`` is free-form, for people."""

    dataset: str
    dataset_sha256: str
    masks: str = MASKS_NAME
    masks_bytes: int
    masks_sha256: str
    samples: int
    kept: int
    rule: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        doc = {"format": SUBSET_FORMAT, "version": SUBSET_VERSION}
        doc.update(
            dataset=self.dataset,
            dataset_sha256=self.dataset_sha256,
            masks=self.masks,
            masks_bytes=self.masks_bytes,
            masks_sha256=self.masks_sha256,
            samples=self.samples,
            kept=self.kept,
            rule=self.rule,
        )
        return json.dumps(doc, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str) -> SubsetIndex:
        """FormatError naming ``source`` for anything but a subset index of this version."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise FormatError(f"{source}: not JSON ({exc})") from exc
        if not isinstance(doc, dict) or doc.get("format") != SUBSET_FORMAT:
            raise FormatError(f"{source}: not a shardstream subset index")
        if doc.get("version") != SUBSET_VERSION:
            raise FormatError(f"{source}: subset version {doc.get('version')!r}; this shardstream reads 1")
        strings = ("dataset", "dataset_sha256", "masks", "masks_sha256")
        numbers = ("masks_bytes", "samples", "kept")
        for key in strings:
            if not isinstance(doc.get(key), str) or not doc[key]:
                raise FormatError(f"{source}: {key!r} is missing or not a string")
        for key in numbers:
            if isinstance(doc.get(key), bool) or not isinstance(doc.get(key), int) or doc[key] < 0:
                raise FormatError(f"{source}: {key!r} is missing or not a count")
        masks = doc["masks"]
        if "/" in masks or "\\" in masks or masks in (".", ".."):
            raise FormatError(f"{source}: masks {masks!r} must be a file name beside the subset index")
        rule = doc.get("rule", {})
        return cls(**{k: doc[k] for k in strings + numbers}, rule=rule if isinstance(rule, dict) else {})


def write_subset(
    out: str | os.PathLike[str],
    *,
    dataset: str,
    index_bytes: bytes,
    counts: np.ndarray,
    masks: Iterable[np.ndarray | None],
    rule: dict[str, Any] | None = None,
) -> SubsetIndex:
    """Publishes a subset of the dataset whose index is at ``dataset`` (its bytes: ``index_bytes``, its
    per-shard ``counts``) into the folder ``out``: the masks (one per shard, see ``encode_masks``), then
    the JSON. A local ``dataset`` is recorded relative to ``out``, so the two move together."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    data = encode_masks(counts, masks)
    kept = int(np.frombuffer(data, dtype="<u8", count=1, offset=24)[0])
    write_atomic(folder / MASKS_NAME, data)
    where = dataset
    if "://" not in dataset:
        where = os.path.relpath(os.path.abspath(dataset), os.path.abspath(folder))
    subset = SubsetIndex(
        dataset=where,
        dataset_sha256=hashlib.sha256(index_bytes).hexdigest(),
        masks_bytes=len(data),
        masks_sha256=hashlib.sha256(data).hexdigest(),
        samples=int(np.asarray(counts, dtype=np.int64).sum()),
        kept=kept,
        rule=dict(rule or {}),
    )
    write_atomic(folder / SUBSET_NAME, subset.to_json().encode("utf-8"))
    return subset
