"""Where a pack in parts on an object store packs its parts on this machine: one folder per OUTDIR URL.

Trade-off: the folder is named by the URL's hash, so a retry on the same machine resumes from it, and a
retry elsewhere starts the part again from its journal in OUTDIR.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

SCRATCH_ENV = "SHARDSTREAM_SCRATCH"  # the scratch root; else shardstream-scratch in the temp folder


def scratch_for(url: str) -> Path:
    """This OUTDIR's parts on this machine."""
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    base = os.environ.get(SCRATCH_ENV) or os.path.join(tempfile.gettempdir(), "shardstream-scratch")
    return Path(base) / digest
