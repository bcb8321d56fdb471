"""Keyed pseudo-random permutations of [0, n) in O(1) memory: a Feistel network with cycle walking.

A shard order for 10^7 shards never becomes a list: position i maps to shard ``permute(i)`` on demand.
The vectorised form gives the same answers for whole arrays, when counts are known anyway.
"""

from __future__ import annotations

import hashlib

import numpy as np

_ROUNDS = 6
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _round_keys(seed: int, epoch: int, salt: str) -> np.ndarray:
    digest = hashlib.blake2b(f"{salt}:{seed}:{epoch}".encode(), digest_size=8 * _ROUNDS).digest()
    return np.frombuffer(digest, dtype="<u8").astype(np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    # splitmix64's finaliser: cheap, well-distributed, wraps modulo 2^64 as numpy uint64 does.
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


class Permutation:
    """A bijection on [0, n) keyed by (seed, epoch, salt)."""

    def __init__(self, n: int, seed: int, epoch: int, salt: str = "shards") -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, not {n}")
        self.n = n
        bits = max(2, (n - 1).bit_length())
        bits += bits % 2
        self._half = np.uint64(bits // 2)
        self._mask = np.uint64((1 << (bits // 2)) - 1)
        self._keys = _round_keys(seed, epoch, salt)

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._mask
        for key in self._keys:
            left, right = right, left ^ (_mix(right ^ key) & self._mask)
        return (left << self._half) | right

    def array(self, indices: np.ndarray | None = None) -> np.ndarray:
        x = np.arange(self.n, dtype=np.uint64) if indices is None else np.asarray(indices, dtype=np.uint64)
        with np.errstate(over="ignore"):
            y = self._encrypt(x)
            out_of_range = y >= self.n
            # Cycle walking: the domain is < 4n, so a few extra rounds settle every element.
            while out_of_range.any():
                y[out_of_range] = self._encrypt(y[out_of_range])
                out_of_range = y >= self.n
        return y.astype(np.int64)

    def __call__(self, index: int) -> int:
        if not 0 <= index < self.n:
            raise IndexError(f"{index} outside [0, {self.n})")
        return int(self.array(np.array([index]))[0])
