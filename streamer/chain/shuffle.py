"""Shuffle through a bounded buffer of undecoded samples; its state names buffered samples, not their bytes.

Restoring re-reads the buffered samples by id through the source (one seek each), so resuming costs at
most ``size`` random reads, whatever the position in the epoch. The seed is ``buffer_seed``: a pure
function of the dataset seed, the epoch and the place, so every rank and worker shuffles differently.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any

from .node import Item, Node, is_int, state_id, state_keys_of

_MT_WORDS = 624  # the Mersenne Twister's state: 624 32-bit words, then the index of the next one


def buffer_seed(seed: int, epoch: int, rank: int, world: int, worker: int, workers: int) -> int:
    """The shuffle buffer's seed for one worker of one rank in one epoch."""
    text = f"buffer:{seed}:{epoch}:{rank * workers + worker}:{world}:{workers}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def check_buffer(size: int, initial: int | None) -> int:
    """``initial`` resolved (None: ``size``); ValueError unless size >= 1 and initial in [1, size]."""
    if size < 1:
        raise ValueError(f"buffer_size must be >= 1, not {size}")
    if initial is not None and not 1 <= initial <= size:
        raise ValueError(f"initial must be in [1, buffer_size={size}], not {initial}")
    return size if initial is None else initial


class ShuffleBuffer(Node):
    """Fill to ``initial`` before the first sample, then grow to ``size`` while handing samples out.

    ``source``: the node whose samples are shuffled (its ``read_one`` re-reads a restored buffer);
    ``size``: samples held at most; ``initial``: None is ``size``; ``seed``: the buffer's random seed
    (``buffer_seed`` gives one per dataset seed, epoch, rank and worker).
    """

    state_keys = frozenset({"buffer", "rng"})

    def __init__(self, source: Node, *, size: int, initial: int | None, seed: int) -> None:
        super().__init__()
        self.source = source
        self.size = size
        self.initial = check_buffer(size, initial)
        self.seed = seed
        self._buffer: list[Item] = []
        self._rng = random.Random(seed)

    def _current_state(self) -> dict[str, Any]:
        return {
            "source": self.source.get_state(),
            "buffer": [(shard, index) for shard, index, _ in self._buffer],
            "rng": self._rng.getstate(),
        }

    def check_state(self, state: Any) -> None:
        """A list of at most ``size`` (shard, index) ids and a ``random.Random`` state of the version this
        Python writes; ValueError naming the key. Which ids the reader had passed is its dataset's check."""
        state_keys_of(self, state, self.state_keys | {"source"})
        buffer = state["buffer"]
        if not isinstance(buffer, (list, tuple)) or len(buffer) > self.size:
            what = f"{len(buffer)} ids" if isinstance(buffer, (list, tuple)) else repr(buffer)[:60]
            raise ValueError(f"the saved ShuffleBuffer state has buffer={what}; it holds at most {self.size}")
        for item in buffer:
            state_id(self, item, "buffer id")
        if not _is_rng_state(state["rng"]):
            raise ValueError(
                f"the saved ShuffleBuffer state has rng={state['rng']!r:.60}: not a random.Random state"
            )

    def _pick(self) -> Item:
        buffer = self._buffer
        j = int(self._rng.random() * len(buffer))
        buffer[j], buffer[-1] = buffer[-1], buffer[j]
        return buffer.pop()

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        self._rng = random.Random(self.seed)
        self.source.reset(state["source"] if state else None)
        if state:
            rng_state = state["rng"]
            self._rng.setstate((rng_state[0], tuple(rng_state[1]), rng_state[2]))
            self._buffer = [(s, i, self.source.read_one(s, i)) for s, i in state["buffer"]]
        else:
            self._buffer = []
        buffer = self._buffer
        source = self.source
        draw = self._rng.random
        initial, size = self.initial, self.size
        for item in source:
            n = len(buffer) + 1  # with the incoming sample
            if n < initial:
                buffer.append(item)
                continue
            if n < size:
                # Growing: take one more in for every one handed out, until the buffer is full.
                buffer.append(item)
                extra = next(source, None)
                if extra is not None:
                    buffer.append(extra)
                yield self._pick()
                continue
            # Full: what _pick does, without the append and pop. The incoming sample takes the place of
            # the one handed out (or is handed out itself), so the stream is the same either way.
            j = int(draw() * n)
            if j == n - 1:
                yield item
            else:
                out = buffer[j]
                buffer[j] = item
                yield out
        while buffer:
            yield self._pick()


def _is_rng_state(rng: Any) -> bool:
    """``random.Random.getstate()``'s value (its tuples lists after JSON): version 3, 624 words under 2^32
    and an index to 624, no gauss or a float. setstate alone takes version 2, words over 2^32 and any
    gauss, and continues with another sequence."""
    if not (isinstance(rng, (list, tuple)) and len(rng) == 3 and rng[0] == 3):
        return False
    words, gauss = rng[1], rng[2]
    if not (isinstance(words, (list, tuple)) and len(words) == _MT_WORDS + 1):
        return False
    if not all(is_int(w) and 0 <= w < 1 << 32 for w in words[:_MT_WORDS]):
        return False
    return is_int(words[-1]) and 0 <= words[-1] <= _MT_WORDS and (gauss is None or isinstance(gauss, float))
