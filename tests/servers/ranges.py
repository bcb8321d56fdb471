"""Range, validators and conditional requests decided as nginx decides them (one range only, no multipart)."""

from __future__ import annotations

import email.utils
import os
from collections.abc import Mapping


def parse_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """``(start, end_exclusive)``, ``"unsatisfiable"`` (416), or None (200, the whole file), decided as
    nginx 1.22's range filter decides: ``bytes=`` in any case, spaces allowed around numbers, a bad spec or
    ``a > b`` is 416, ranges starting at or past the end are dropped, an empty file answers 200 to
    ``0-``. Several ranges answer 200 here (nginx sends multipart/byteranges)."""
    if not header or len(header) < 7 or header[:6].lower() != "bytes=":
        return None
    text, i, ranges = header + "\0", 6, []

    def number(i: int) -> tuple[int, int] | None:
        j = i
        while text[j].isascii() and text[j].isdigit():
            j += 1
        return (int(text[i:j]), j) if j > i else None

    def spaces(i: int) -> int:
        while text[i] == " ":
            i += 1
        return i

    while True:
        i = spaces(i)
        suffix = text[i] == "-"
        if suffix:
            i += 1
        else:
            got = number(i)
            if got is None:
                return "unsatisfiable"
            start, i = got
            i = spaces(i)
            if text[i] != "-":
                return "unsatisfiable"
            i = spaces(i + 1)
        if not suffix and text[i] in ",\0":
            end = size
        else:
            got = number(i)
            if got is None:
                return "unsatisfiable"
            end, i = got
            i = spaces(i)
            if text[i] not in ",\0":
                return "unsatisfiable"
            if suffix:
                start, end = (size - end if end < size else 0), size
            elif start > end:
                return "unsatisfiable"
            else:
                end = min(end + 1, size)
        if start < end:
            ranges.append((start, end))
        elif start == 0:
            return None
        if text[i] != ",":
            break
        i += 1
    if not ranges:
        return "unsatisfiable"
    return ranges[0] if len(ranges) == 1 else None


def validators(st: os.stat_result, version: int) -> tuple[str, str, int]:
    """``(etag, last_modified, mtime)`` of a file, shifted by ``version`` when the object was changed."""
    etag = f'"{st.st_mtime_ns:x}-{st.st_size:x}' + (f'-v{version}"' if version else '"')
    last_modified = email.utils.formatdate(st.st_mtime + version, usegmt=True)
    mtime = int(st.st_mtime) + version
    return etag, last_modified, mtime


def conditional_status(headers: Mapping[str, str], etag: str, mtime: int) -> int | None:
    """412 or 304 when a conditional header says so, in RFC 9110's order; None to go on serving."""
    if_match = headers.get("If-Match")
    if if_match is not None and "*" not in if_match and etag not in _etag_list(if_match):
        return 412
    ius = _parse_date(headers.get("If-Unmodified-Since"))
    if if_match is None and ius is not None and mtime > ius:
        return 412
    inm = headers.get("If-None-Match")
    if inm is not None and ("*" in inm or etag in [t.removeprefix("W/") for t in _etag_list(inm)]):
        return 304
    ims = _parse_date(headers.get("If-Modified-Since"))
    if inm is None and ims is not None and mtime <= ims:
        return 304
    return None


def wanted_range(
    headers: Mapping[str, str], size: int, etag: str, last_modified: str
) -> tuple[int, int] | str | None:
    """The Range asked for, as parse_range gives it, or None (all) when If-Range names an older copy."""
    wanted = parse_range(headers.get("Range"), size)  # on HEAD too, as nginx does
    if_range = headers.get("If-Range")
    if wanted is not None and if_range is not None and if_range.strip() not in (etag, last_modified):
        wanted = None  # the object changed since the client's copy: send it all
    return wanted


def _etag_list(header: str) -> list[str]:
    return [t.strip() for t in header.split(",") if t.strip()]


def _parse_date(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(email.utils.parsedate_to_datetime(value).timestamp())
    except (TypeError, ValueError, IndexError):
        return None
