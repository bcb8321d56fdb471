"""Random access over an index: ``len``, ``[i]`` and ``.get(key)``, each one seek or one Range request.

Sample i's bytes are [offsets[i], offsets[i+1]) of its shard, so a read is one pread locally or one
bounded HTTP Range request; each shard's offsets sidecar is fetched once and kept (the last
``offsets_cache`` shards). A key goes through the index's sorted key file: one block read, then the
sample. Nothing holds every key or every offset in memory. Compressed shards or shards without a sidecar
fall back to reading from the shard's start.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from shardstream.errors import FormatError
from shardstream.format.keyfile import IDX_SUFFIX, KeyFile
from shardstream.io.httpoptions import HttpOptions, bind
from shardstream.io.objstoreoptions import ObjectStoreOptions
from shardstream.io.openers import OpenOptions, read_range, read_small

from ..chain.opener import ShardOpener
from ..decode.fields import Fields
from ..decode.make import for_epoch, make_decoder
from ..placement.shards import ShardList


class ShardMap(Dataset):  # type: ignore[type-arg]
    """Map-style dataset over a shardstream index (``shardstream pack`` or ``shardstream index``).

    ``source`` is the index's path, folder or URL. ``[i]`` is the i-th sample in index order (negative i
    counts from the end); ``.get(key)`` the first sample whose ``__key__`` is ``key``. Out of range is an
    ``IndexError``, an unknown key a ``KeyError``.

    ``fields``, ``decode``, ``image``, ``image_size``, ``audio_rate``, ``audio_mono``, ``video_frames``,
    ``decoders`` (decoding), ``http``, ``object_store``, ``cache_dir`` and ``cache_size`` (reaching
    shards) are ``ShardDataset``'s. ``offsets_cache``: shards whose offsets sidecars are kept in memory,
    the most recently read (at least 1).

    ``video`` and ``audio`` (clips and windows of long members, as ``ShardDataset``'s): a sample's clips
    fall where (``seed``, epoch, key) puts them, so ``[i]`` gives the same clips until ``set_epoch``
    moves them (epoch 0 until then; DataLoader workers made after the call see it, persistent ones
    made before do not).
    """

    def __init__(
        self,
        source: str | os.PathLike[str],
        *,
        fields: Sequence[str] | Mapping[str, str | Sequence[str]] | None = None,
        decode: bool | Callable[[dict[str, Any]], Any] = True,
        image: str = "pil",
        image_size: int | tuple[int, int] | None = None,
        audio_rate: int | None = None,
        audio_mono: bool = False,
        video_frames: int | None = None,
        decoders: Mapping[str, Callable[[bytes], Any]] | None = None,
        video: Any = None,
        audio: Any = None,
        seed: int = 0,
        http: HttpOptions | None = None,
        object_store: ObjectStoreOptions | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_size: int | str | None = None,
        offsets_cache: int = 64,
    ) -> None:
        if offsets_cache < 1:
            raise ValueError(f"offsets_cache must be >= 1, not {offsets_cache}")
        self.options = OpenOptions.of(bind(http, source), cache_dir, cache_size, object_store)  # its origin
        self.shards = ShardList.from_source(source, self.options)
        if self.shards.counts is None:
            raise ValueError(
                f"source: {os.fspath(source)!r} is not an index; random access needs per-shard counts "
                "(make one with: shardstream index SOURCE)"
            )
        self.ends = np.cumsum(self.shards.counts)
        self.fields = Fields.of(fields)
        self.decoder = make_decoder(
            decode,
            image=image,
            image_size=image_size,
            audio_rate=audio_rate,
            audio_mono=audio_mono,
            video_frames=video_frames,
            decoders=decoders,
            fields=self.fields,
            video=video,
            audio=audio,
        )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, not {seed!r}")
        self.seed = seed
        self.set_epoch(0)
        self.offsets_cache = offsets_cache
        self._opener = self._new_opener()
        self._keys: KeyFile | None = None

    def set_epoch(self, epoch: int) -> None:
        """Clips and windows from now on fall where (seed, ``epoch``, key) puts them."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be an int >= 0, not {epoch!r}")
        self.epoch = epoch
        if self.decoder is not None:
            for_epoch(self.decoder, self.seed, epoch)

    def _new_opener(self) -> ShardOpener:
        """Reads by offsets (and the no-sidecar fallback), keeping ``offsets_cache`` shards' sidecars."""
        return ShardOpener(self.shards, self.options, fields=self.fields, offsets_kept=self.offsets_cache)

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def locate(self, i: int) -> tuple[int, int]:
        """(shard, sample within the shard) of the i-th sample."""
        total = len(self)
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"ShardMap indices are integers, not {type(i).__name__}")
        position = int(i) + total if i < 0 else int(i)
        if not 0 <= position < total:
            raise IndexError(f"sample {i} is out of range for {total} samples")
        shard = int(np.searchsorted(self.ends, position, side="right"))
        before = int(self.ends[shard - 1]) if shard else 0
        return shard, position - before

    def __getitem__(self, i: int) -> Any:
        return self.read(*self.locate(i))

    def get(self, key: str) -> Any:
        """The first sample whose key is ``key``; KeyError when none is."""
        place = self.place(key)
        if place is None:
            raise KeyError(key)
        return self.read(*place)

    def place(self, key: str) -> tuple[int, int] | None:
        """(shard, sample within the shard) of the first sample whose key is ``key``, or None."""
        place = self._key_file().lookup(key)
        if place is not None:
            shard, sample = place
            if shard >= len(self.shards) or sample >= int(self.shards.counts[shard]):  # type: ignore[index]
                raise FormatError(f"{self.shards.keys_url}: key {key!r} points past shard {shard}'s samples")
        return place

    def position(self, shard: int, sample: int) -> int:
        """The index-order position of sample ``sample`` of shard ``shard`` (what ``[i]`` takes)."""
        return (int(self.ends[shard - 1]) if shard else 0) + sample

    def read(self, shard: int, sample: int) -> Any:
        """Sample ``sample`` of shard ``shard``, decoded as configured."""
        raw = self._opener.read_one(shard, sample)
        return self.decoder(raw) if self.decoder is not None else raw

    def _key_file(self) -> KeyFile:
        if self._keys is None:
            url = self.shards.keys_url
            version = self.shards.metadata_version
            idx = read_small(url + IDX_SUFFIX, self.options, version=version) if url is not None else None
            if url is None or idx is None:
                raise FormatError(
                    f"{self.shards.source}: the index has no key file; lookup by key needs one "
                    "(index the shards with: shardstream index SOURCE)"
                )
            options = self.options
            self._keys = KeyFile(idx, lambda start, end: read_range(url, start, end, options), source=url)
        return self._keys

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_opener"] = self._new_opener()  # each DataLoader worker fetches its own sidecars
        state["_keys"] = None
        return state
