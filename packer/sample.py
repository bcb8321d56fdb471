"""What flows through the packer: a cheap sample plan, the loaded sample, and a reject."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MemberPlan:
    """One member to be: read from ``path``, or taken as ``data`` (a record's JSON, a table's image).

    ``listed``: the (st_dev, st_ino) a folder listing saw at ``path``; the file read must be that one,
    reached by no link (what is there may have been swapped since). None: a file a record names, as it is.
    """

    ext: str
    path: str | None = None
    listed: tuple[int, int] | None = None
    data: bytes | bytearray | memoryview | None = None
    origin: str = ""  # the manifest field it came from, for messages
    media: bool = False  # data that media options process as they do files (bytes embedded in a table)


@dataclass(frozen=True)
class SamplePlan:
    """A sample before any file is read; sources emit these without touching file contents."""

    key: str
    source: str
    members: tuple[MemberPlan, ...]


@dataclass(frozen=True)
class Sample:
    key: str
    source: str
    members: tuple[tuple[str, bytes], ...] = field(default_factory=tuple)

    @property
    def nbytes(self) -> int:
        return sum(len(data) for _, data in self.members)


@dataclass(frozen=True)
class Reject:
    """An input that will not be packed; written to the rejects report and counted."""

    source: str
    reason: str
    kind: str = "rejected"

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "reason": self.reason, "kind": self.kind}
