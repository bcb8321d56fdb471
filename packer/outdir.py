"""What a pack owns in OUTDIR: found there already (refuse, resume, overwrite), cleared on --overwrite."""

from __future__ import annotations

import shutil
from pathlib import Path

from shardstream.format import (
    INDEX_NAME,
    OFFSETS_SUFFIX,
    REJECTS_NAME,
    SAMPLE_COLUMNS_SUFFIX,
    SHARD_SUFFIX,
)
from shardstream.format.constants import COLUMNS_NAME, JOURNAL_NAME, KEYS_NAME, WORK_DIR_NAME
from shardstream.format.keyfile import IDX_SUFFIX


def existing_outputs(outdir: Path) -> list[Path]:
    """What a pack would write in OUTDIR, found there already (a pack in parts' folder included)."""
    from .cluster.plan import PARTS_DIR_NAME

    names = (INDEX_NAME, JOURNAL_NAME, WORK_DIR_NAME, PARTS_DIR_NAME)
    return sorted(
        p for p in outdir.iterdir() if p.name in names or p.name.endswith((SHARD_SUFFIX, ".tar.gz", ".tgz"))
    )


_SINGLE = (INDEX_NAME, COLUMNS_NAME, JOURNAL_NAME, REJECTS_NAME, KEYS_NAME, KEYS_NAME + IDX_SUFFIX)


def clear_outputs(outdir: Path, prefix: str) -> None:
    """``--overwrite``: this dataset's shards, sidecars, index, key file, rejects and work folders go."""
    from .cluster.plan import remove_parts
    from .cluster.store import LocalStore

    remove_parts(LocalStore(outdir))
    for path in outdir.iterdir():
        ours = path.name.startswith(f"{prefix}-") and path.name.endswith(
            (SHARD_SUFFIX, OFFSETS_SUFFIX, SAMPLE_COLUMNS_SUFFIX)
        )
        hidden_tmp = path.name.startswith(f".{prefix}-") and path.name.endswith(".tmp")
        if ours or hidden_tmp or path.name in _SINGLE:
            path.unlink()
    shutil.rmtree(outdir / WORK_DIR_NAME, ignore_errors=True)
