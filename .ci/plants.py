"""Replay the planted bugs: each patch in tests/plants/ must make at least one of its named tests fail.

A mutation tool finds what the suite misses; these are the bugs a reviewer planted by hand, kept so that
"this test catches that bug" stays checkable. Each plant is applied to a fresh clone of HEAD (the work
tree is never touched), and only its named tests run there, with the clone's code first on PYTHONPATH so
subprocesses (the CLI, torchrun, DataLoader workers) run the planted code too.

    .ci/plants [NAME ...]      # all plants, or those named; exit 1 if any plant survives or fails to apply
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANTS = ROOT / "tests" / "plants"


def read_manifest() -> list[tuple[str, list[str]]]:
    """``NAME.patch  test-node-id [test-node-id ...]`` per line; # starts a comment."""
    entries = []
    for line in (PLANTS / "MANIFEST").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            entries.append((fields[0], fields[1:]))
    return entries


def replay(clone: Path, patch: str, tests: list[str]) -> tuple[str, float]:
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=clone, check=True)
    applied = subprocess.run(["git", "apply", str(PLANTS / patch)], cwd=clone, capture_output=True, text=True)
    if applied.returncode:
        return f"does not apply: {applied.stderr.strip().splitlines()[0]}", 0.0
    env = {**os.environ, "PYTHONPATH": str(clone)}
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        cwd=clone, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    if run.returncode == 1:
        failed = [line.split()[1] for line in run.stdout.splitlines() if line.startswith("FAILED ")]
        return f"caught by {failed[0] if failed else 'a failing test'}", elapsed
    if run.returncode == 0:
        return "SURVIVED", elapsed
    return f"error (pytest exit {run.returncode}): {run.stdout.strip().splitlines()[-1:]}", elapsed


def main(names: list[str]) -> int:
    entries = [e for e in read_manifest() if not names or e[0].removesuffix(".patch") in names]
    bad = 0
    with tempfile.TemporaryDirectory(prefix="plants-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for so in (ROOT / "shardstream" / "format").glob("_tarscan*.so"):  # the C fast path, as built here
            shutil.copy2(so, clone / "shardstream" / "format")
        for patch, tests in entries:
            verdict, seconds = replay(clone, patch, tests)
            bad += not verdict.startswith("caught")
            print(f"{patch:48} {seconds:6.1f}s  {verdict}", flush=True)
    print(f"{len(entries) - bad} of {len(entries)} plants caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
