"""Bounded gunzip for ``.gz`` members: inflated a piece at a time and refused past a cap (a 1 KiB member
can inflate to 1 GiB), at the cost of holding up to the cap (twice, briefly, while its pieces are joined).
"""

from __future__ import annotations

import zlib

GUNZIP_MAX_BYTES = 256 << 20  # 256 MiB: far above any member a sample should hold inflated
_PIECE = 16 << 20  # inflated per call: the most held past the cap before it is noticed


def gunzip(data: bytes, max_bytes: int) -> bytes:
    """``data`` gunzipped, every gzip member of it in turn (as ``gzip.decompress``; zero padding after
    them is allowed); ValueError once the output would pass ``max_bytes``, or for data cut short."""
    pieces: list[bytes] = []
    budget = max_bytes
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=31)  # gzip framing: zlib checks the header, CRC and length
        pending = rest
        while True:
            piece = inflater.decompress(pending, min(_PIECE, budget + 1))
            budget -= len(piece)
            if budget < 0:
                raise ValueError(
                    f"inflates to more than {max_bytes} bytes, the cap gunzip_max_bytes (a decoding "
                    "option; raise it if such members are expected)"
                )
            pieces.append(piece)
            if inflater.eof:
                break
            if not piece and len(inflater.unconsumed_tail) == len(pending):  # no progress: input ran out
                raise ValueError("the gzip data ends before its end-of-stream marker (cut short?)")
            pending = inflater.unconsumed_tail
        rest = inflater.unused_data.lstrip(b"\0")
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
