"""Manifest source: one record = one sample; string fields naming media files become members.

Detection is by file extension (cheap, no stat per string); a string with a media extension that names
no file rejects its record as a missing file rather than silently dropping the member.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

from shardstream.errors import KeyRuleError
from shardstream.format import check_key
from shardstream.mediatypes import FILE_MEMBER_EXTENSIONS

from ..sample import MemberPlan, Reject, SamplePlan
from .records import read_records
from .remote import join_media
from .slices import Slice

_FIELD_CLEAN = re.compile(r"[^a-z0-9_-]+")
MEMBER_NAMINGS = ("ext", "field")


def _file_extension(value: str) -> str | None:
    if not value or len(value) > 4096 or "\n" in value:
        return None
    base = value.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    if dot <= 0:
        return None
    ext = base[dot + 1 :].lower()
    return ext if ext in FILE_MEMBER_EXTENSIONS else None


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"holds {len(value)} bytes of binary data; only file paths are packed")
    return str(value)  # datetimes, decimals: as text, the way Parquet readers print them


class ManifestSource:
    """Turn a manifest's records into sample plans; pure, cheap, no media file is opened here."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        media_root: str | os.PathLike[str] | None = None,
        key_field: str | None = None,
        media_fields: Sequence[str] | None = None,
        member_naming: str = "ext",
        manifest_format: str | None = None,
        part: Slice | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.part = part
        root = os.fspath(media_root) if media_root else None
        self.media_root = root or os.path.dirname(os.path.abspath(self.path))
        self.key_field = key_field
        self.media_fields = frozenset(media_fields) if media_fields else None
        self.member_naming = member_naming
        self.manifest_format = manifest_format

    def __iter__(self) -> Iterator[SamplePlan | Reject]:
        for number, record, error in read_records(self.path, self.manifest_format, self.part):
            where = f"{self.path}:record {number}"
            if error is not None:
                yield Reject(where, error, "bad-record")
                continue
            yield self.plan(number, record, where)

    def _key(self, number: int, record: dict[str, Any]) -> str:
        if self.key_field is not None:
            if self.key_field not in record:
                raise KeyRuleError(f"record has no field {self.key_field!r} (--key-field)")
            value = record[self.key_field]
        else:
            value = next((record[f] for f in ("id", "key") if f in record), f"{number:09d}")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise KeyRuleError(f"key must be a string or an integer, not {type(value).__name__}")
        return check_key(str(value))

    def _paths(self, name: str, value: Any) -> list[tuple[str, str]] | None:
        forced = self.media_fields is not None and name in self.media_fields
        if self.media_fields is not None and not forced:
            return None
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) for v in values):
            return None
        found = []
        for item in values:
            ext = _file_extension(item)
            if ext is None and forced:
                base = item.rsplit("/", 1)[-1]
                ext = base[base.rfind(".") + 1 :].lower() if "." in base.lstrip(".") else None
                if ext is None:
                    raise KeyRuleError(f"field {name!r}: {item!r} has no file extension")
            if ext is None:
                return None
            found.append((ext, item))
        return found

    def plan(self, number: int, record: Any, where: str) -> SamplePlan | Reject:
        if not isinstance(record, dict):
            return Reject(where, f"record is a {type(record).__name__}, not an object", "bad-record")
        try:
            key = self._key(number, record)
        except KeyRuleError as exc:
            return Reject(where, str(exc), "bad-key")
        members: list[MemberPlan] = []
        names: dict[str, str] = {}
        for name, value in record.items():
            try:
                paths = self._paths(name, value)
            except KeyRuleError as exc:
                return Reject(where, str(exc), "bad-record")
            if not paths:
                continue
            field_part = _FIELD_CLEAN.sub("_", name.lower()) + "." if self.member_naming == "field" else ""
            for i, (ext, item) in enumerate(paths):
                index_part = f"{i}." if isinstance(value, list) else ""
                member_ext = f"{field_part}{index_part}{ext}"
                if member_ext in names:
                    return Reject(
                        where,
                        f"fields {names[member_ext]!r} and {name!r} both map to member {key}.{member_ext}; "
                        "pass --member-naming field to name members by field",
                        "member-clash",
                    )
                names[member_ext] = name
                full = join_media(self.media_root, item)
                members.append(MemberPlan(ext=member_ext, path=full, origin=name))
        if "json" in names:
            return Reject(
                where,
                f"field {names['json']!r} maps to member {key}.json, which holds the record",
                "member-clash",
            )
        try:
            text = json.dumps(record, ensure_ascii=False, default=_json_default)
        except (TypeError, ValueError) as exc:
            return Reject(where, f"record cannot be stored as JSON: {exc}", "bad-record")
        members.append(MemberPlan(ext="json", data=text.encode("utf-8", "surrogateescape")))
        return SamplePlan(key=key, source=where, members=tuple(members))
