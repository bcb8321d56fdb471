"""ShardDataset: tar shards into PyTorch — placed per rank and worker, shuffled, decoded, resumable.

The chain per worker is visible and small: placement -> SampleReader -> ShuffleBuffer -> decode.
"""

from __future__ import annotations

import hashlib
import operator
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from torch.utils.data import IterableDataset, get_worker_info

from packer.errors import ShardReadError

from .http import HttpOptions
from .nodes import Node
from .openers import OpenOptions, scheme_of
from .placement import ResampledShards, WholeShards, counted_segments, rank_quota
from .reader import ON_ERROR, RawSample, SampleReader
from .shards import ShardList
from .shared import SharedState
from .shuffle import ShuffleBuffer

Place = tuple[int, int, int, int]  # rank, world, worker, workers


def _distributed_place() -> tuple[int, int] | None:
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


_sample_of = operator.itemgetter(2)  # (shard, index, sample) -> sample


def _stream_seed(seed: int, epoch: int, place: Place) -> int:
    text = f"buffer:{seed}:{epoch}:{place[0] * place[3] + place[2]}:{place[1]}:{place[3]}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class ShardDataset(IterableDataset):
    """Samples from tar shards: every sample once per epoch, equal counts on every rank, resumable.

    ``source`` is a brace pattern of paths or URLs (``data/train-{000000..000127}.tar``), a list of them,
    or the packer's index (its path, URL or folder). With the index, sample counts are known and every
    rank yields exactly ``len(ds)`` samples per epoch, worker i of every rank the same number.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | Sequence[str],
        *,
        shuffle: bool = True,
        seed: int = 0,
        buffer_size: int = 1000,
        initial: int | None = None,
        remainder: str = "drop",
        resampled: bool = False,
        fields: Sequence[str] | None = None,
        decode: bool | Callable[[dict[str, Any]], Any] = True,
        image: str = "pil",
        image_size: int | tuple[int, int] | None = None,
        audio_rate: int | None = None,
        audio_mono: bool = False,
        video_frames: int | None = None,
        decoders: Mapping[str, Callable[[bytes], Any]] | None = None,
        on_error: str = "raise",
        keep_length: bool = True,
        rank: int | None = None,
        world_size: int | None = None,
        http: HttpOptions | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_size: int | str | None = None,
        prefetch: int | None = None,
        prefetch_bytes: int = 16 << 20,
    ) -> None:
        super().__init__()
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")
        if remainder not in ("drop", "pad"):
            raise ValueError(f"remainder must be 'drop' or 'pad', not {remainder!r}")
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be >= 1, not {buffer_size}")
        if isinstance(cache_size, str):
            from packer.options import parse_size

            cache_size = parse_size(cache_size, name="cache_size")
        self.open_options = OpenOptions(
            http=http or HttpOptions(),
            cache_dir=os.fspath(cache_dir) if cache_dir is not None else None,
            cache_size=cache_size,
        )
        self.shards = ShardList.from_source(source, self.open_options)
        if prefetch is not None and prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, not {prefetch}")
        # Read-ahead pays off where latency is: remote shards. Local ones come from the page cache.
        remote = scheme_of(self.shards.urls[0]) not in ("file", "pipe")
        self.prefetch = prefetch if prefetch is not None else (2 if remote else 0)
        self.prefetch_bytes = prefetch_bytes
        self.shuffle = shuffle
        self.seed = seed
        self.buffer_size = buffer_size
        self.initial = initial
        self.remainder = remainder
        self.resampled = resampled
        self.fields = list(fields) if fields else None
        self.on_error = on_error
        self.keep_length = keep_length
        self._owed = 0
        self.rank, self.world_size = rank, world_size
        self._shared = SharedState()
        self._pending: dict[str, Any] | None = None
        self._node: Node[RawSample] | None = None
        self._epoch_in_use: int | None = None
        self._place: Place | None = None
        if callable(decode):
            self._decode: Callable[[dict[str, Any]], Any] | None = decode
        elif decode:
            from .decode import SampleDecoder

            self._decode = SampleDecoder(
                image=image, image_size=image_size, audio_rate=audio_rate, audio_mono=audio_mono,
                video_frames=video_frames, decoders=decoders, fields=self.fields,
            )  # fmt: skip
        else:
            self._decode = None

    # -- epochs, counts, errors ------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Like DistributedSampler.set_epoch; reaches DataLoader workers, persistent ones too."""
        self._shared.epoch = epoch

    @property
    def epoch(self) -> int:
        return self._shared.epoch

    @property
    def errors(self) -> dict[str, int]:
        """Samples and shards skipped (on_error="skip"/"warn"), counted across all workers."""
        return self._shared.counts()

    def rank_world(self) -> tuple[int, int]:
        dist = _distributed_place()
        rank = self.rank if self.rank is not None else (dist[0] if dist else int(os.environ.get("RANK", 0)))
        world = (
            self.world_size
            if self.world_size is not None
            else (dist[1] if dist else int(os.environ.get("WORLD_SIZE", 1)))
        )
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"rank must be in [0, world_size), got rank={rank}, world_size={world}")
        return rank, world

    def __len__(self) -> int:
        """Samples this rank yields per epoch (needs the index's counts)."""
        total = self.shards.total
        if total is None or self.resampled:
            raise TypeError("len() needs per-shard counts (pass the packer's index) and resampled=False")
        return rank_quota(total, self.rank_world()[1], self.remainder)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # Spawned workers cannot see the parent's process group; resolve the rank here, in the parent.
        if state["rank"] is None or state["world_size"] is None:
            state["rank"], state["world_size"] = self.rank_world()
        state["_node"] = None
        return state

    # -- resumption ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        if self._node is None:
            return {"epoch": self.epoch, "place": None, "node": None}
        return {"epoch": self._epoch_in_use, "place": list(self._place or ()), "node": self._node.get_state(),
                "owed": self._owed}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue, on the next iteration, exactly where the run that saved ``state`` stood."""
        self._pending = dict(state)

    # -- iteration -------------------------------------------------------------------------------------
    def _segments(self, place: Place, epoch: int) -> Any:
        rank, world, worker, workers = place
        n = len(self.shards)
        common = {"rank": rank, "world": world, "worker": worker, "workers": workers, "seed": self.seed,
                  "epoch": epoch}  # fmt: skip
        if self.resampled:
            return ResampledShards(n, **common)
        if self.shards.counts is not None:
            counts = self.shards.counts
            return counted_segments(counts, shuffle=self.shuffle, remainder=self.remainder, **common)
        if world * workers > 1:
            warnings.warn(
                f"{self.shards.source}: no per-shard sample counts (pass the packer's index), so shards are "
                "dealt whole and ranks may yield different sample counts (DDP can hang on the last step)",
                stacklevel=3,
            )
        return WholeShards(n, shuffle=self.shuffle, **common)

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rank, world = self.rank_world()
        place = (rank, world, worker, workers)
        pending, self._pending = self._pending, None
        epoch = self.epoch
        node_state = None
        if pending and pending.get("node") is not None:
            saved = tuple(pending["place"])
            if saved != place:
                raise ValueError(
                    f"state was saved at (rank, world, worker, workers)={saved} but this run is at {place}; "
                    "the stream depends on world size and worker count, so resume with the same ones"
                )
            epoch, node_state = int(pending["epoch"]), pending["node"]
        elif pending:
            epoch = int(pending["epoch"])
        reader = SampleReader(
            self.shards, self._segments(place, epoch), fields=self.fields, on_error=self.on_error,
            counters=self._shared, options=self.open_options, prefetch=self.prefetch,
            prefetch_bytes=self.prefetch_bytes, keep_length=self.keep_length,
        )  # fmt: skip
        node: Node[RawSample] = reader
        if self.shuffle and self.buffer_size > 1:
            node = ShuffleBuffer(reader, size=self.buffer_size, initial=self.initial,
                                 seed=_stream_seed(self.seed, epoch, place))  # fmt: skip
        node.reset(node_state)
        self._node, self._epoch_in_use, self._place = node, epoch, place
        decode = self._decode
        self._owed = int(pending.get("owed", 0)) if pending else 0
        if decode is None and not self._owed:
            yield from map(_sample_of, node)  # raw bytes: the loop runs in C
            return
        last = None
        for shard, index, sample in node:
            if decode is None:
                yield sample
                continue
            try:
                decoded = decode(sample)
            except (ShardReadError, KeyError) as exc:
                if self.on_error == "raise":
                    raise self._locate(exc, reader, shard, index) from exc.__cause__ or exc
                self._shared.add("decode_errors")
                if self.on_error == "warn":
                    warnings.warn(f"skipping undecodable sample: {exc}", stacklevel=2)
                # The rank still owes a sample: the next good one is repeated, so lengths stay equal.
                if self.keep_length and self.shards.counts is not None:
                    self._owed += 1
                continue
            last = decoded
            yield decoded
            while self._owed:
                self._owed -= 1
                self._shared.add("samples_repeated")
                yield dict(decoded)
        while self._owed and last is not None:  # the damage came last: repeat from before it
            self._owed -= 1
            self._shared.add("samples_repeated")
            yield dict(last)

    @staticmethod
    def _locate(exc: Exception, reader: SampleReader, shard: int, index: int) -> Exception:
        """Add the sample's byte offset to a decode error, found only now, on the error path."""
        if not isinstance(exc, ShardReadError) or exc.offset is not None:
            return exc
        offsets = reader.offsets(shard)
        offset = int(offsets[index]) if offsets is not None else None
        return ShardReadError(exc.message, url=exc.url, member=exc.member, offset=offset)

