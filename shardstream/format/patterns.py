"""Brace patterns (``train-{000000..000127}.tar``) as lazy sequences: item i is computed, never a list."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import FormatError
from .constants import DEFAULT_DIGITS, SHARD_SUFFIX

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(\d+))?$")


@dataclass(frozen=True)
class _Range:
    start: int
    step: int
    count: int
    width: int

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> str:
        value = self.start + i * self.step
        return f"{value:0{self.width}d}" if self.width else str(value)


def _parse_group(body: str, pattern: str) -> Sequence[str]:
    match = _RANGE.match(body)
    if match:
        lo_text, hi_text, step_text = match.groups()
        lo, hi = int(lo_text), int(hi_text)
        step = int(step_text or 1)
        if step <= 0:
            raise FormatError(f"pattern {pattern!r}: range step must be positive")
        padded = (len(lo_text) > 1 and lo_text.startswith("0")) or (
            len(hi_text) > 1 and hi_text.startswith("0")
        )
        width = max(len(lo_text), len(hi_text)) if padded else 0
        direction = 1 if hi >= lo else -1
        count = abs(hi - lo) // step + 1
        return _Range(lo, step * direction, count, width)
    if "," in body:
        return tuple(body.split(","))
    # Not a brace expression (as in bash): keep the braces literally.
    return ("{" + body + "}",)


class BracePattern(Sequence[str]):
    """A brace pattern as a random-access sequence; O(number of brace groups) memory at any size."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._literals: list[str] = []
        self._groups: list[Sequence[str]] = []
        pos = 0
        literal = []
        while pos < len(pattern):
            ch = pattern[pos]
            if ch == "{":
                close = pattern.find("}", pos)
                if close < 0:
                    raise FormatError(f"pattern {pattern!r}: '{{' at {pos} is never closed")
                body = pattern[pos + 1 : close]
                if "{" in body:
                    raise FormatError(f"pattern {pattern!r}: nested braces are not supported")
                self._literals.append("".join(literal))
                literal = []
                self._groups.append(_parse_group(body, pattern))
                pos = close + 1
            else:
                literal.append(ch)
                pos += 1
        self._literals.append("".join(literal))
        self._length = 1
        for group in self._groups:
            self._length *= len(group)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        if not isinstance(index, int):
            raise TypeError("BracePattern indices must be integers")
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"index {index} out of range for {self._length} items of {self.pattern!r}")
        parts = []
        # The last group varies fastest, as in bash.
        for group in reversed(self._groups):
            index, digit = divmod(index, len(group))
            parts.append(group[digit])
        parts.reverse()
        out = [self._literals[0]]
        for part, literal in zip(parts, self._literals[1:], strict=True):
            out.append(part)
            out.append(literal)
        return "".join(out)

    def __iter__(self) -> Iterator[str]:
        for i in range(self._length):
            yield self[i]

    def __repr__(self) -> str:
        return f"BracePattern({self.pattern!r})"


def shard_digits(count: int) -> int:
    """Digits in the names of ``count`` shards: six, more when the last number needs them."""
    return max(DEFAULT_DIGITS, len(str(max(count - 1, 0))))


def shard_name(prefix: str, number: int, digits: int = DEFAULT_DIGITS) -> str:
    if number >= 10**digits:
        raise FormatError(f"shard number {number} needs more than {digits} digits")
    return f"{prefix}-{number:0{digits}d}{SHARD_SUFFIX}"


def shard_pattern(prefix: str, count: int, digits: int | None = None) -> str:
    """The brace pattern naming shards 0..count-1, e.g. ``train-{000000..000127}.tar``; by default as
    wide as ``shard_digits(count)``."""
    if count <= 0:
        raise ValueError("count must be positive")
    digits = shard_digits(count) if digits is None else digits
    if count == 1:
        return shard_name(prefix, 0, digits)
    return f"{prefix}-{{{0:0{digits}d}..{count - 1:0{digits}d}}}{SHARD_SUFFIX}"


_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")


def infer_pattern(names: list[str]) -> str | None:
    """A brace pattern giving exactly ``names`` in order (consecutive numbers, one width), else None."""
    if any("{" in name for name in (names[0], names[-1])):
        return None  # a literal brace would read back as a pattern
    if len(names) == 1:
        return names[0]
    first = _NUMBERED.match(names[0])
    if first is None:
        return None
    prefix, digits, suffix = first.groups()
    width, start = len(digits), int(digits)
    for offset, name in enumerate(names):
        if name != f"{prefix}{start + offset:0{width}d}{suffix}":
            return None
    return f"{prefix}{{{start:0{width}d}..{start + len(names) - 1:0{width}d}}}{suffix}"
