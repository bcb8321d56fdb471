"""Metadata downloads (an index, an offsets sidecar, a key file) read whole, capped, gzip decoded.

Trade-off: such a file is parsed from memory, so it is held whole; the cap (``HttpOptions``'s
``max_metadata_size``) is what bounds that memory, and an honest index larger than it needs the knob raised.
"""

from __future__ import annotations

import zlib
from typing import BinaryIO

from shardstream.errors import ShardReadError

CAP_KNOB = "HttpOptions(max_metadata_size=...)"
_CHUNK = 1 << 20
_DECODED = ("", "identity")
_GZIP = ("gzip", "x-gzip")


def over_cap(url: str, cap: int, size: str) -> ShardReadError:
    """The error for a download larger than the cap: names the URL, the cap and the knob that raises it."""
    return ShardReadError(
        f"metadata download of {size} is over the cap of {cap} bytes ({cap / (1 << 20):g} MiB); "
        f"a hostile or wrong URL? For an index that big, raise {CAP_KNOB}",
        url=url,
    )


def read_capped(
    stream: BinaryIO, cap: int, *, url: str, declared: int | None = None, encoding: str = ""
) -> bytes:
    """All of ``stream``, at most ``cap`` bytes after decoding, else ``over_cap``. ``declared``: the length
    its server announced (over the cap: refused before a byte is read); ``encoding``: its Content-Encoding
    (gzip is decoded, chunk by chunk and never past the cap; anything else but identity is refused)."""
    encoding = encoding.strip().lower()
    if encoding not in _DECODED + _GZIP:
        raise ShardReadError(
            f"the answer is {encoding!r}-encoded, which shardstream does not decode (it asks for identity)",
            url=url,
        )
    if declared is not None and declared > cap:
        raise over_cap(
            url, cap, f"{declared} bytes ({declared / (1 << 20):g} MiB, {declared / (1 << 30):g} GiB)"
        )
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding in _GZIP else None
    parts, held = [], 0  # a list, not a growing bytearray: reallocating one would hold it twice
    while chunk := stream.read(_CHUNK):
        if inflate is not None:
            try:
                chunk = inflate.decompress(chunk, cap + 1 - held)  # never inflates past the cap
            except zlib.error as exc:
                raise ShardReadError(f"its gzip encoding is damaged: {exc}", url=url) from exc
        parts.append(chunk)
        held += len(chunk)
        if held > cap:
            raise over_cap(url, cap, "more than that")
    if inflate is not None and not inflate.eof:
        raise ShardReadError("its gzip encoding ends short (a truncated answer)", url=url)
    return b"".join(parts)
