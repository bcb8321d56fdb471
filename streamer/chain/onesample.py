"""One sample read from its bytes by the offsets sidecar: one C call for a plain one, checked as strictly as
reading the shard front to back (the trade-off: the next sample's header is read with it)."""

from __future__ import annotations

from typing import Any

from shardstream.errors import ShardReadError
from shardstream.format import iter_samples
from shardstream.format.constants import BLOCK
from shardstream.format.tarread import names_key, stale_sidecar
from shardstream.format.window import MappedWindow, SpanWindow

try:  # a plain sample's headers in one C call
    from shardstream.format._tarscan import sample_at as _sample_at
except ImportError:
    _sample_at = None


def sample_in(
    buf: Any,
    members: Any,
    pos: int,
    stop: int,
    *,
    url: str,
    start: int,
    end: int,
    mapping: Any = None,
    limit: int = 0,
) -> dict[str, Any]:
    """The one sample in ``buf[pos:stop]``, bytes ``start``..``end`` of the shard at ``url`` (as shown: the
    caller cuts credentials out once per shard, since it goes into every sample's ``__url__``): one C call
    for a plain sample, else the general reader, which names any damage. ``members``: what member values
    slice (``buf``, or a view of ``mapping``, the mapped shard ``buf`` is); without a mapping, ``pos`` is 0.
    ``limit``: where ``buf``'s valid bytes end; the header at ``stop``, when below it, must not go on with
    the sample's key (else the sidecar split a sample: a StaleSidecarError). One compare, in bytes read
    with the sample's: what keeps a read by offsets as strict as reading front to back.
    Every read of one sample by its offsets comes here (deferred reads, restores, ShardMap)."""
    if _sample_at is not None:
        sample = _sample_at(buf, members, pos, stop, url, limit)
        if sample is not None:
            return sample
    window = MappedWindow(mapping, start) if mapping is not None else SpanWindow(buf, stop)
    spans: list[tuple[int, int]] = []
    try:
        for found in iter_samples(None, url=url, start=start, ends=(end,), window=window, spans=spans):  # type: ignore[arg-type]
            if (
                spans[-1][1] != end
            ):  # the archive ended inside the span: the shard is shorter than its sidecar
                raise stale_sidecar(f"sample {found['__key__']!r} ending at byte {spans[-1][1]}", end, url)
            if stop + BLOCK <= limit and names_key(buf, stop, found["__key__"]):
                raise stale_sidecar(f"sample {found['__key__']!r} going on past its end", end, url)
            return found
    except ShardReadError as exc:
        # The caller read the span whole, so a member cut short by the span's end runs past where the
        # sidecar ends the sample: the sidecar's, not the shard's, fault.
        if mapping is None and exc.message.startswith("truncated tar"):
            raise stale_sidecar(f"member {exc.member!r} running past it", end, url) from exc
        raise
    raise ShardReadError("no sample where the offsets sidecar puts one", url=url, offset=start)
