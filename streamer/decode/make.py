"""A dataset's decode function, chosen once: the caller's own, a ``SampleDecoder`` built from the
options, the ``fields`` selection alone, or none. Imports the decoders (Pillow, torchcodec) only when
something decodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .fields import Fields

Decode = Callable[[dict[str, Any]], Any]


def make_decoder(decode: bool | Decode, **options: Any) -> Callable[[Any], Any] | None:
    """The per-sample decode function: the caller's own, a SampleDecoder built from the options, or, for
    ``decode=False``, the ``fields`` selection alone (bytes, renamed and checked) or None."""
    if callable(decode):
        return decode
    if not decode:
        fields = Fields.of(options.get("fields"))
        return fields.select if fields is not None else None
    from .sample import SampleDecoder

    return SampleDecoder(**options)


def for_epoch(decoder: Callable[[Any], Any], seed: int, epoch: int) -> Callable[[Any], Any]:
    """``decoder``, told the epoch its clips and windows fall in (``SampleDecoder.set_epoch``); a caller's
    own function as it is."""
    set_epoch = getattr(decoder, "set_epoch", None)
    if set_epoch is not None:
        set_epoch(seed, epoch)
    return decoder
