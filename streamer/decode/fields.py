"""Which members a sample keeps, under which names: ``fields``, with alternatives, checked once when made.

``["jpg", "json"]``: those members, under their own names. ``{"image": "jpg;png;webp", "meta": "json"}``:
per name, the first of its ``;``-separated members the sample has (webdataset's ``rename``). Trade-off:
members are dropped before the shuffle buffer, so a sample lacking an entry is kept whole, at no cost to
good samples, for its MissingMemberError to say what it really holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shardstream.errors import MissingMemberError

__all__ = ["Fields"]

Entry = tuple[str, tuple[str, ...]]  # (the name handed out, the members tried, in order)


@dataclass(frozen=True)
class Fields:
    """A parsed ``fields`` option: ``entries`` pair each name handed out with the members it takes."""

    entries: tuple[Entry, ...]
    members: frozenset[str] = field(init=False, repr=False, compare=False)  # every member any entry takes
    renames: bool = field(init=False, repr=False, compare=False)  # any name other than its one member

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", frozenset(m for _, ms in self.entries for m in ms))
        object.__setattr__(self, "renames", any(ms != (name,) for name, ms in self.entries))

    @classmethod
    def of(cls, spec: Any) -> Fields | None:
        """From a list of member names or a mapping of names to ``;``-separated members (or lists of
        them); None or empty: every member. ValueError naming ``fields`` otherwise."""
        if spec is None or isinstance(spec, Fields):
            return spec
        if isinstance(spec, Mapping):
            entries = tuple((_name(key), _members(key, value)) for key, value in spec.items())
        elif isinstance(spec, Sequence) and not isinstance(spec, (str, bytes)):
            entries = tuple((name, (name,)) for name in map(_list_name, spec))
        else:
            raise ValueError(
                f"fields must be a list of member names like ['jpg', 'json'] or a mapping of names to "
                f"members like {{'image': 'jpg;png', 'meta': 'json'}}, not {spec!r}"
            )
        if not entries:
            return None
        seen: dict[str, str] = {}
        for name, members in entries:
            for member in members:
                if member in seen:
                    raise ValueError(
                        f"fields: member {member!r} is given for both {seen[member]!r} and {name!r}"
                    )
                seen[member] = name
        return cls(entries)

    def keep(self, sample: dict[str, Any]) -> dict[str, Any]:
        """The sample with only the members ``members`` names; whole when it lacks an entry, so the error
        raised for it (``pick``) names what it holds."""
        members = self.members
        kept = {k: v for k, v in sample.items() if k.startswith("__") or k in members}
        for _, alternatives in self.entries:
            if not any(m in kept for m in alternatives):
                return sample
        return kept

    def pick(self, sample: dict[str, Any]) -> list[tuple[str, str]]:
        """(name handed out, member it takes) per entry: the first alternative the sample has; a
        MissingMemberError saying what the sample holds when it has none of an entry's."""
        picked = []
        for name, alternatives in self.entries:
            for member in alternatives:
                if member in sample:
                    picked.append((name, member))
                    break
            else:
                raise self.missing(sample, name, alternatives)
        return picked

    def select(self, sample: dict[str, Any]) -> dict[str, Any]:
        """The sample's picked members under their names, undecoded (``decode=False`` with renames)."""
        out = {k: v for k, v in sample.items() if k.startswith("__")}
        for name, member in self.pick(sample):
            out[name] = sample[member]
        return out

    def missing(self, sample: dict[str, Any], name: str, alternatives: tuple[str, ...]) -> MissingMemberError:
        held = sorted(k for k in sample if not k.startswith("__"))
        if alternatives == (name,):
            wanted = f"no member {name!r}"
        else:
            wanted = f"none of {', '.join(map(repr, alternatives))} (fields entry {name!r})"
        asked = [n for n, _ in self.entries] if not self.renames else dict(self._shown())
        return MissingMemberError(
            f"sample {sample.get('__key__')!r} has {wanted}; it holds {held} (fields={asked}); pick "
            "members every sample has, or list alternatives: fields={'image': 'jpg;png'}",
            url=str(sample.get("__url__", "<no __url__>")),
            offset=sample.get("__offset__"),  # no member: the one asked for is not there to name
        )

    def _shown(self) -> list[tuple[str, str]]:
        return [(name, ";".join(members)) for name, members in self.entries]


def _name(key: Any) -> str:
    if not isinstance(key, str) or not key or key.startswith("__"):
        raise ValueError(f"fields: a name must be a non-empty string not starting with '__', not {key!r}")
    return key


def _list_name(name: Any) -> str:
    _name(name)
    if ";" in name:
        raise ValueError(
            f"fields: {name!r} lists alternatives; give them a name to be handed out under, "
            f"fields={{'image': {name!r}}}"
        )
    return name


def _members(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(";")]
    elif isinstance(value, Sequence) and not isinstance(value, bytes):
        parts = list(value)
    else:
        parts = []
    if not parts or not all(isinstance(p, str) and p and not p.startswith("__") for p in parts):
        raise ValueError(
            f"fields[{key!r}] must be member names separated by ';' (like 'jpg;png;webp') or a list "
            f"of them, not {value!r}"
        )
    if len(set(parts)) != len(parts):
        raise ValueError(f"fields[{key!r}] names a member twice: {value!r}")
    return tuple(parts)
