"""Tar shards to samples, by hand: 512-byte headers parsed and grouped in one loop, without tarfile.

One fused loop (headers, checksums, member data, grouping by key) rather than a member iterator feeding
a grouping stage: the hop between two generators cost as much per member as parsing its header. A plain
regular member's headers are read by one C call (_tarscan.c) when that is built; everything else, and
everything without it, in Python. Reads ustar, pax ('x'/'g') and GNU long names ('L'); regular files only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO
from zlib import adler32

from ..errors import ShardReadError, StaleSidecarError, redact_url
from .constants import BLOCK
from .keys import split_member_name
from .tarmember import (
    GLOBAL_PAX,
    LONGNAME,
    PAX,
    REGULAR,
    ZERO_BLOCK,
    checksum_matches,
    header_name,
    number,
    pax_records,
    pax_size,
)
from .tarmember import long_name as read_long_name
from .window import MappedWindow, ReadWindow, SpanWindow

try:  # a member's headers in one C call (_tarscan.c): plain, or pax + plain as webdataset's writer leaves
    from ._tarscan import member_at as _member_at
except ImportError:  # without it, or when it declines, Python reads them
    _member_at = None


def iter_samples(
    stream: BinaryIO,
    *,
    url: str = "<stream>",
    start: int = 0,
    ends: Sequence[int] | None = None,
    spans: list[tuple[int, int]] | None = None,
    window: ReadWindow | MappedWindow | SpanWindow | None = None,
) -> Iterator[dict[str, Any]]:
    """Samples: consecutive members sharing a key, ``{"__key__", "__url__", ext: data}``.

    ``start`` is the stream's position in the archive, so offsets stay true after a seek. With ``ends``
    (the byte where each sample ends, from the offsets sidecar) a sample is complete at its end byte, and
    handed out when the next member shows another key (or the archive, or the window, ends): a member of
    the same key there means the sidecar split a sample (a StaleSidecarError), and damage there is the next
    sample's, not this one's. Without ``ends``, a sample is handed out when the next key shows up.
    ``spans``, when given, receives the (first header, end) byte range of each sample just before it is
    yielded. A ``MappedWindow`` (whose ``pos`` is ``start``) hands members out as read-only memoryviews
    into the mapped shard instead of bytes.
    Damage raises ShardReadError with the URL, member and offset; samples read before it have been yielded.
    """
    window = window if window is not None else ReadWindow(stream)
    try:
        buf, members_from = window.buf, window.data
        pos, end = window.pos, window.end  # kept in locals on the hot path, handed back before a refill
        offset = start
        long_name: str | None = None
        pax: dict[str, str] = {}
        pax_at = start
        first_header = None  # of the current member: pax and long-name headers come before its own
        sample: dict[str, Any] | None = None
        key = None
        sample_start = start
        ended = False  # the sample reached its sidecar end: handed out when the next member's key is known
        shown = redact_url(url)  # the sample shows its URL without credentials; the opened one keeps them
        if ends is None:
            ends = ()
        i, last = 0, len(ends)
        scan = _member_at
        while True:
            # Fast path: a regular member (its header, or a pax header and its own), headers and data in
            # the window, read by one C call.
            member = None
            if scan is not None and pos + BLOCK <= end and not pax and long_name is None:
                member = scan(buf, pos)
            if member is not None:
                size, name_key, ext, data_at = member
                padded_size = size + (-size % BLOCK)
                if data_at + padded_size > end:
                    member = None
            if member is not None:
                data = members_from[data_at : data_at + size]
                if first_header is None:  # else a global pax header came first, as the general path counts it
                    first_header = offset
                offset += data_at - pos + padded_size
                pos = data_at + padded_size
            else:
                if pos + BLOCK <= end:
                    header = buf[pos : pos + BLOCK]
                    pos += BLOCK
                else:
                    window.pos = pos
                    header = window.take(BLOCK)
                    pos, end = window.pos, window.end
                    if len(header) < BLOCK:
                        if header:
                            raise ShardReadError("truncated tar header", url=url, offset=offset)
                        break  # a tar without the end-of-archive blocks, as some writers leave
                # The checksum is the header's byte sum with its own field counted as spaces (8 * 32 = 256);
                # adler32's low half is 1 + the byte sum mod 65521, computed in C. This reads the field as
                # "%06o\0 " (GNU tar, Python's tarfile, our packer), whose own byte sum follows from its
                # value: 6 * 48 + 32 and the octal digits. Other spellings are checked exactly before they
                # count as damage. Equal mod 65521 is equal when both sums are below 65521: 256 or more
                # zero bytes (any short-named ustar header) bound the byte sum to 256 * 255; other headers
                # are summed exactly.
                # Only that spelling: int() would also read a sign, '_' or spaces, and the last two bytes are
                # not in the value, so another spelling's byte sum can make up for a wrong checksum.
                field = header[148:156]
                try:
                    if field[6:] != b"\0 " or not field[:6].isdigit():
                        raise ValueError(field)
                    expected = int(field[:6], 8)  # an 8 or a 9 raises
                    fast = expected - 256 + 320 + _DIGIT_SUM[expected >> 9] + _DIGIT_SUM[expected & 511]
                except (ValueError, IndexError):
                    fast = -1
                if not (
                    (adler32(header) & 0xFFFF) - 1 == fast < _MOD_ADLER and header.count(0) >= _ZEROS_BOUND
                ) and not checksum_matches(header):
                    if header == ZERO_BLOCK:
                        break  # the end-of-archive block
                    raise ShardReadError("corrupt tar header (checksum mismatch)", url=url, offset=offset)
                if first_header is None:
                    first_header = offset
                if pax and "size" in pax:
                    size = pax_size(pax["size"], url, pax_at)
                else:
                    field = header[124:135]  # the common "%011o\0" form, without a split list
                    try:  # isdigit: int() would also take a sign, '_' or spaces; a 12th digit counts too
                        size = (
                            int(field, 8)
                            if not header[135] and field.isdigit()
                            else number(header[124:136], url, offset)
                        )
                    except ValueError:  # an 8 or a 9
                        size = number(header[124:136], url, offset)
                padded_size = size + (-size % BLOCK)
                if pos + padded_size <= end:
                    data = members_from[pos : pos + size]  # one copy (none when mapped), padding skipped
                    pos += padded_size
                else:
                    window.pos = pos
                    data = window.take(size)
                    got = len(data)
                    if got == size and padded_size > size:
                        got += min(padded_size - size, window.fill(padded_size - size))
                        window.pos += got - size
                    pos, end = window.pos, window.end
                    if got < padded_size:
                        # The sample before a cut member is whole when the cut one starts another key.
                        regular = header[156] in REGULAR and not pax and long_name is None
                        if (
                            sample is not None
                            and not ended  # (an ended sample is handed out below, on the way out)
                            and regular
                            and i >= last
                            and split_member_name(header_name(header))[0] != key
                        ):
                            yield sample
                            sample = None
                        raise ShardReadError(
                            f"truncated tar: member needs {padded_size} bytes with padding, {got} remain",
                            url=url,
                            member=header_name(header),
                            offset=offset,
                        )
                offset += BLOCK + padded_size
                typeflag = header[156]
                if typeflag not in REGULAR:
                    data = bytes(data)  # a mapped window's view: parsed as bytes, and rare
                    if typeflag == PAX:
                        pax_at = offset - BLOCK - padded_size  # where an error in its records is reported
                        try:
                            pax = pax_records(data)
                        except ValueError as exc:
                            raise ShardReadError(
                                f"corrupt pax header ({exc})", url=url, offset=offset - BLOCK - padded_size
                            ) from exc
                    elif typeflag == LONGNAME:
                        long_name = read_long_name(data)
                    elif typeflag != GLOBAL_PAX:  # directories, links: not sample members
                        first_header, long_name, pax = None, None, {}
                    continue
                if long_name is not None or pax:
                    name = long_name if long_name is not None else pax.get("path") or header_name(header)
                    long_name, pax = None, {}
                elif header[345]:  # a ustar prefix
                    name = header_name(header)
                else:
                    stop = header.find(0, 0, 100)  # NUL-terminated unless it fills the field
                    name = header[: stop if stop >= 0 else 100].decode("utf-8", "surrogateescape")
                # The key/extension rule (keys.split_member_name), inlined: this runs once per member.
                dot = name.find(".", name.rfind("/") + 1)
                if dot >= 0:
                    name_key, ext = name[:dot], name[dot + 1 :]
                else:
                    name_key, ext = name, ""
            if sample is None or name_key != key or ended:
                if sample is not None:
                    if ended:
                        if name_key == key:  # the sidecar ended a sample whose members go on
                            ended = False  # (not handed out on the way out either)
                            raise stale_sidecar(f"sample {key!r} going on past its end", ends[i - 1], url)
                        ended = False
                    elif i < last:  # the sidecar says this sample goes on: its span holds a second key
                        raise stale_sidecar(f"another key ({name_key!r}) inside sample {key!r}", ends[i], url)
                    if spans is not None:
                        spans.append((sample_start, first_header))
                    yield sample
                key = name_key
                sample = {"__key__": key, "__url__": shown}
                sample_start = first_header
            sample[ext] = data
            first_header = None
            if i < last and offset >= ends[i]:
                if offset > ends[i]:  # a member runs over the end the sidecar gives
                    raise stale_sidecar(f"sample {key!r} runs on to byte {offset}", ends[i], url)
                ended = True
                i += 1
        if sample is not None:
            if spans is not None:
                spans.append((sample_start, offset))
            yield sample
    except ShardReadError as exc:
        # A sample complete at its sidecar end is whole whatever comes after it (not a split, though).
        if ended and sample is not None and not isinstance(exc, StaleSidecarError):
            if spans is not None:
                spans.append((sample_start, ends[i - 1]))
            yield sample
        raise
    finally:
        window.release()  # the buffer goes on to the next shard's window, whether this one ended or not


def names_key(buf: Any, pos: int, key: str) -> bool:
    """Whether the plain header at ``buf[pos]`` names a member of ``key`` (a sample split by its sidecar).
    One compare of the name field's first bytes; a ustar prefix, pax or long name is not looked into."""
    name = key.encode("utf-8", "surrogateescape")
    n = len(name)
    # The byte after the key first: it rules out most other keys without a slice (ours end in a dot).
    return n < 100 and buf[pos + n] in _KEY_ENDS and buf[pos : pos + n] == name and not buf[pos + 345]


_KEY_ENDS = (0x2E, 0)  # "." before an extension, or NUL: a member named by its key alone


def stale_sidecar(found: str, end: int, url: str) -> StaleSidecarError:
    """The error for a sample whose bytes do not end where the offsets sidecar says (at byte ``end``)."""
    return StaleSidecarError(
        f"the offsets sidecar ends a sample at byte {end}, but the shard has {found}: the shard changed "
        "after its sidecar was written; run `shardstream index` again",
        url=url,
        offset=end,
    )


_MOD_ADLER = 65521
_ZEROS_BOUND = 256  # with this many zero bytes a header's byte sum is at most 256 * 255 < _MOD_ADLER


# The sum of a number's octal digits, for numbers below 512 (three digits); two lookups cover six.
_DIGIT_SUM = bytes(sum(int(digit) for digit in f"{value:o}") for value in range(512))
