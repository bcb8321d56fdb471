"""A dataset's decode function, chosen once: the caller's own, a ``SampleDecoder`` built from the
options, or none. Imports the decoders (Pillow, torchcodec) only when something decodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Decode = Callable[[dict[str, Any]], Any]


def make_decoder(decode: bool | Decode, **options: Any) -> Callable[[Any], Any] | None:
    """The per-sample decode function: the caller's own, a SampleDecoder built from the options, or None."""
    if callable(decode):
        return decode
    if not decode:
        return None
    from .sample import SampleDecoder

    return SampleDecoder(**options)
