"""The benchmarks' shared harness, sources: the copy of the project's code that children import.

``snapshot_sources`` copies the SOURCE_PACKAGES (``harness``) when a run starts and children get the copy
first on their PYTHONPATH, so commits landing in the working tree mid-run cannot mix two versions into one
set of ratios; each child reports where it imported them from (``imported_sources``), the parent checks it
(``check_sources``), and ``note_source_drift`` records whether the copy or the tree moved on by the end.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import REPO, SOURCE_PACKAGES


def source_fingerprint(root: Path = REPO) -> str:
    """sha256 (first 12 hex digits) of the SOURCE_PACKAGES' .py and .c files: the code measured."""
    digest = hashlib.sha256()
    sources = [
        path
        for package in SOURCE_PACKAGES
        for ext in ("py", "c")
        for path in root.glob(f"{package}/**/*.{ext}")
    ]
    for path in sorted(sources):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def snapshot_sources(dest: Path) -> Path:
    """Copy the SOURCE_PACKAGES as they are now into ``dest``; children import them from there."""
    shutil.rmtree(dest, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in SOURCE_PACKAGES:
        shutil.copytree(REPO / package, dest / package, ignore=ignore)
    return dest


def imported_sources() -> dict[str, str | None]:
    """Child side: the file each SOURCE_PACKAGE this process imported came from."""
    return {
        name: getattr(sys.modules[name], "__file__", None) for name in SOURCE_PACKAGES if name in sys.modules
    }


def check_sources(name: str, files: dict[str, str | None], src: Path) -> None:
    """Parent side: stop when a child imported one of the SOURCE_PACKAGES from anywhere but ``src``."""
    for package, where in files.items():
        if where is not None and not Path(where).resolve().is_relative_to(src.resolve()):
            raise RuntimeError(f"{name}: the child imported {package} from {where}, not from {src}")


def note_source_drift(result: dict[str, Any], src: Path, log: Callable[[str], None]) -> None:
    """Record the fingerprints of the copy and of the working tree at the end; say when either moved on."""
    result["source_fingerprint_at_end"] = source_fingerprint(src)
    result["working_tree_fingerprint_at_end"] = source_fingerprint(REPO)
    if result["source_fingerprint_at_end"] != result["machine"]["source_fingerprint"]:
        log("WARNING: the source snapshot changed during the run; the figures mix two versions")
    if result["working_tree_fingerprint_at_end"] != result["machine"]["source_fingerprint"]:
        packages = " or ".join(f"{name}/" for name in SOURCE_PACKAGES)
        log(
            f"note: {packages} changed in the working tree during the run; the copy taken at "
            "the start was measured throughout"
        )
