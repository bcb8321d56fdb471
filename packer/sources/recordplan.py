"""One record -> one sample plan: file paths, embedded bytes and `{bytes, path}` structs become members.

Shared by manifests, Parquet/Arrow tables and Python iterables, so one row packs to the same bytes
whichever way it came in. Pure and cheap: no file is opened here, and bytes are referenced, not copied.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import re
import uuid
from collections.abc import Sequence
from typing import Any

from shardstream.errors import KeyRuleError
from shardstream.format import check_key
from shardstream.mediatypes import FILE_MEMBER_EXTENSIONS, sniff_extension

from ..sample import MemberPlan, Reject, SamplePlan
from .remote import join_media

_FIELD_CLEAN = re.compile(r"[^a-z0-9_-]+")
_EXTENSION = re.compile(r"^[a-z0-9]{1,10}$")
MEMBER_NAMINGS = ("ext", "field")
BINARY = (bytes, bytearray, memoryview)
STRUCT_KEYS = frozenset({"bytes", "path"})  # HF datasets' Image/Audio storage
_AS_TEXT = (datetime.date, datetime.time, datetime.timedelta, decimal.Decimal, uuid.UUID)


class Unsupported(Exception):
    """A field value this planner cannot pack; its message names the field."""


def path_extension(value: str, known_only: bool) -> str | None:
    """The lower-case extension of a path's last part; with ``known_only``, only media and member ones."""
    if not value or len(value) > 4096 or "\n" in value:
        return None
    base = value.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    if dot <= 0:
        return None
    ext = base[dot + 1 :].lower()
    if known_only:
        return ext if ext in FILE_MEMBER_EXTENSIONS else None
    return ext if _EXTENSION.match(ext) else None


def _is_struct(value: Any) -> bool:
    return isinstance(value, dict) and "bytes" in value and set(value) <= STRUCT_KEYS


def _is_embedded(value: Any) -> bool:
    return isinstance(value, BINARY) or _is_struct(value) or isinstance(value, os.PathLike)


def _json_default(value: Any) -> Any:
    if isinstance(value, _AS_TEXT):
        return str(value)  # as Parquet readers print them
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    raise TypeError(f"{kind} is not JSON (give media as bytes or a path)")


def _holds_embedded(value: Any) -> bool:
    return any(_is_embedded(v) for v in value) if isinstance(value, list) else _is_embedded(value)


def _all_binary(value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    return bool(values) and all(isinstance(v, BINARY) for v in values)


def _for_json(value: Any) -> Any:
    """A media value as the record's JSON keeps it: structs without their bytes, paths as text."""
    if isinstance(value, list):
        return [_for_json(v) for v in value if not isinstance(v, BINARY)]
    if _is_struct(value):
        return {"path": value.get("path")}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


class RecordPlanner:
    """Turn records (dicts) into sample plans with one rule set: key, members, the record's JSON."""

    def __init__(
        self,
        media_root: str,
        *,
        key_field: str | None = None,
        media_fields: Sequence[str] | None = None,
        member_naming: str = "ext",
    ) -> None:
        self.media_root = media_root
        self.key_field = key_field
        self.media_fields = frozenset(media_fields) if media_fields else None
        self.member_naming = member_naming

    def key(self, number: int, record: dict[str, Any]) -> str:
        if self.key_field is not None:
            if self.key_field not in record:
                raise KeyRuleError(f"record has no field {self.key_field!r} (--key-field)")
            value = record[self.key_field]
        else:
            value = next((record[f] for f in ("id", "key") if f in record), f"{number:09d}")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise KeyRuleError(f"key must be a string or an integer, not {type(value).__name__}")
        return check_key(str(value))

    # -- one field -> members: (ext, path, data) ---------------------------------------------------
    def _file(self, path: str) -> tuple[str, str | None, Any]:
        """A member read from ``path`` (relative to the media root), named by its extension, else bin."""
        return path_extension(path, False) or "bin", join_media(self.media_root, path), None

    def _embedded(self, name: str, value: Any, where: str) -> tuple[str, str | None, Any]:
        if isinstance(value, BINARY):
            return sniff_extension(value) or "bin", None, value
        if isinstance(value, (str, os.PathLike)):
            return self._file(str(os.fspath(value)))
        if not _is_struct(value):
            raise Unsupported(f"field {name!r}{where}: a {type(value).__name__} among media values")
        data, path = value.get("bytes"), value.get("path")
        if path is not None and not isinstance(path, str):
            raise Unsupported(f"field {name!r}{where}: path is a {type(path).__name__}, not text")
        if data is None:
            if not path:
                raise Unsupported(f"field {name!r}{where}: holds neither bytes nor a path")
            return self._file(path)
        if not isinstance(data, BINARY):
            raise Unsupported(f"field {name!r}{where}: bytes is a {type(data).__name__}, not binary")
        return (path and path_extension(path, False)) or sniff_extension(data) or "bin", None, data

    def _paths(self, name: str, value: Any) -> list[tuple[str, str | None, Any]] | None:
        values = value if isinstance(value, list) else [value]
        if any(_is_embedded(v) for v in values):
            return [
                self._embedded(name, v, f" item {i}" if v is not value else "") for i, v in enumerate(values)
            ]
        forced = self.media_fields is not None and name in self.media_fields
        if self.media_fields is not None and not forced:
            return None
        if not values or not all(isinstance(v, str) for v in values):
            return None
        found: list[tuple[str, str | None, Any]] = []
        for item in values:
            ext = path_extension(item, known_only=True)
            if ext is None and forced:
                ext = path_extension(item, known_only=False)
                if ext is None:
                    raise Unsupported(f"field {name!r}: {item!r} has no file extension")
            if ext is None:
                return None
            found.append((ext, join_media(self.media_root, item), None))
        return found

    def plan(self, number: int, record: Any, where: str) -> SamplePlan | Reject:
        if not isinstance(record, dict):
            return Reject(where, f"record is a {type(record).__name__}, not an object", "bad-record")
        try:
            key = self.key(number, record)
        except KeyRuleError as exc:
            return Reject(where, str(exc), "bad-key")
        members: list[MemberPlan] = []
        names: dict[str, str] = {}
        kept: dict[str, Any] | None = None  # the record as its JSON holds it, copied only when it differs
        for name, value in record.items():
            try:
                paths = self._paths(name, value)
            except Unsupported as exc:
                return Reject(where, str(exc), "bad-record")
            if not paths:
                continue
            if _holds_embedded(value):
                kept = dict(record) if kept is None else kept
                if _all_binary(value):
                    del kept[name]
                else:
                    kept[name] = _for_json(value)
            field_part = _FIELD_CLEAN.sub("_", name.lower()) + "." if self.member_naming == "field" else ""
            for i, (ext, path, data) in enumerate(paths):
                member_ext = f"{field_part}{f'{i}.' if isinstance(value, list) else ''}{ext}"
                if member_ext in names:
                    return Reject(
                        where,
                        f"fields {names[member_ext]!r} and {name!r} both map to member {key}.{member_ext}; "
                        "pass --member-naming field to name members by field",
                        "member-clash",
                    )
                names[member_ext] = name
                members.append(MemberPlan(ext=member_ext, path=path, data=data, origin=name, media=True))
        if "json" in names:
            return Reject(
                where,
                f"field {names['json']!r} maps to member {key}.json, which holds the record",
                "member-clash",
            )
        try:
            text = json.dumps(record if kept is None else kept, ensure_ascii=False, default=_json_default)
        except (TypeError, ValueError) as exc:
            return Reject(where, f"{_culprit(record)}cannot be stored as JSON: {exc}", "bad-record")
        members.append(MemberPlan(ext="json", data=text.encode("utf-8", "surrogateescape")))
        return SamplePlan(key=key, source=where, members=tuple(members))


def _culprit(record: dict[str, Any]) -> str:
    """``field 'x': `` for the first field that will not serialise (only looked for on that error path)."""
    for name, value in record.items():
        try:
            json.dumps(value, default=_json_default)
        except (TypeError, ValueError):
            return f"field {name!r}: "
    return ""
