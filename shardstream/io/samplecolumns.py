"""A shard's per-sample columns read by URL: fetched whole (local, HTTP, object store, the node's metadata
cache), decoded and checked against the index's count; the one home of that read (the budget planner and
the subset writer both read them). Trade-off: a shard's whole sidecar at a time (8 bytes a sample and
column), never one sample's values.
"""

from __future__ import annotations

import numpy as np

from ..errors import FormatError, redact_url
from ..format.samplecols import decode_sample_columns
from .openers import OpenOptions, read_small


def read_sample_columns(
    url: str, options: OpenOptions | None, *, samples: int | None, version: str | None, missing: str
) -> dict[str, np.ndarray]:
    """The columns of the sidecar at ``url``, by name (``samples``: the index's count for its shard, None:
    unchecked; ``version``: the index's hash, for the metadata cache). A missing sidecar is a FormatError
    naming it, then ``missing`` (what the caller knows of why it should be there and the fix); damage is
    one naming it too. Credentials in the URL never reach a message."""
    shown = redact_url(url)
    data = read_small(url, options, version=version)
    if data is None:
        raise FormatError(f"{shown}: {missing}")
    return decode_sample_columns(data, source=shown, samples=samples)
