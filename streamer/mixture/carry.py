"""Where a source stands between epochs: spans carried over from a changed epoch, then its pass stream on.

A source's stream is normally its pass stream from a start position. A mixture changed in the middle
of an epoch (``rest.py``) can leave part of a source's epoch run unread when the new weights want less
of it; that part is carried: the next epochs read it first, then the pass stream from where it stood,
so no sample of a pass is skipped or read twice. ``Position`` is (carry, start); an epoch reading n
samples of the source moves it along (``advance``) and reads the first n positions of it (``spans``).
Trade-off: a carried epoch is read as a restore's deal (spans per worker), a few more random reads where
the carry's spans fall, in exchange for one rule for every epoch after a change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..chain.node import is_int
from ..elastic.deal import Span, cut_spans, join

UNBOUNDED = 1 << 62  # a pass stream has no end: the fresh part's span for cutting


@dataclass(frozen=True)
class Position:
    """A source's stream from here: ``carry`` (spans of its pass stream, read first), then the pass stream
    from ``start``."""

    carry: tuple[Span, ...]
    start: int

    @property
    def carried(self) -> int:
        return sum(stop - begin for begin, stop in self.carry)

    def advance(self, n: int) -> Position:
        """Where the stream stands once its first ``n`` positions were read (``n`` < 0, an epoch before the
        one this position is for: its start moved back, only ever read by a chain that reads a deal)."""
        if n <= 0:
            return Position(self.carry, self.start + n)
        if n < self.carried:
            return Position(cut_spans(self.carry, n, self.carried), self.start)
        return Position((), self.start + n - self.carried)

    def spans(self, begin: int, end: int) -> tuple[Span, ...]:
        """Pass-stream spans of this stream's positions [begin, end)."""
        laid = (*self.carry, (self.start, UNBOUNDED))
        return join(cut_spans(laid, begin, end)) if begin < end else ()

    def then(self, more: Sequence[Span]) -> Position:
        """``more`` read first, before this stream (the unread part of an epoch a change left)."""
        return Position(join([*more, *self.carry]), self.start)


def carry_state(positions: Mapping[str, Position]) -> dict[str, list[list[int]]]:
    """The ``"carry"`` key a state saves: each source with a carry, its spans (none: ``{}``)."""
    return {name: [list(s) for s in p.carry] for name, p in positions.items() if p.carry}


def carry_of(state: Mapping[str, Any], names: Sequence[str]) -> dict[str, tuple[Span, ...]]:
    """A saved ``"carry"``, checked: ``{name: spans}`` of known sources, each span [a, b) with 0 <= a < b;
    ValueError naming the key."""
    value = state.get("carry") or {}
    if not isinstance(value, Mapping) or not set(value) <= set(names):
        raise ValueError(f"the state has carry={value!r:.80}; it must map sources to lists of spans")
    out = {}
    for name, spans in value.items():
        if not isinstance(spans, (list, tuple)) or not all(
            isinstance(s, (list, tuple)) and len(s) == 2 and all(is_int(x) for x in s) and 0 <= s[0] < s[1]
            for s in spans
        ):
            raise ValueError(f"the state has carry[{name!r}]={spans!r:.80}; it must be spans [a, b), a < b")
        out[str(name)] = tuple((int(a), int(b)) for a, b in spans)
    return out


def positions_of(state: Mapping[str, Any], names: Sequence[str]) -> dict[str, Position]:
    """Each source's stream at the saved epoch's (or rest's) start: its ``"carry"``, then ``"sources"``."""
    carry = carry_of(state, names)
    return {str(n): Position(carry.get(str(n), ()), int(v[0])) for n, v in state["sources"].items()}
