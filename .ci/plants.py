"""Replay the planted bugs: each patch in tests/plants/ must make at least one of its named tests fail.

A mutation tool finds what the suite misses; these are the bugs a reviewer planted by hand, kept so that
"this test catches that bug" stays checkable. Each plant is applied to a fresh clone of HEAD (the work
tree is never touched), and only its named tests run there, with the clone's code first on PYTHONPATH so
subprocesses (the CLI, torchrun, DataLoader workers) run the planted code too. The clone gets every C
extension as built here, or, for a plant that patches C, the patched source compiled.

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


# Builds one extension module the way the install does (setuptools), into the clone, from outside it so
# that the clone's pyproject.toml does not add the package's other modules to the build.
BUILD = (
    "import sys; from setuptools import Extension, setup; "
    "setup(name='plant', ext_modules=[Extension(sys.argv[1], [sys.argv[2]])], "
    "script_args=['-q', 'build_ext', '--build-lib', sys.argv[3], '--build-temp', '.'])"
)


PACKAGES = ("shardstream", "streamer", "packer")


def install_c_fast_path(clone: Path) -> None:
    """Every C extension as built here (the tar header path, the budget pool, the interleave, the subset
    copy, ...), so a plant that patches no C runs on them, as the install does: with the tar path alone,
    the rest fell back to their Python loops and a test comparing C with Python compared Python twice."""
    for package in PACKAGES:
        for so in (ROOT / package).rglob("_*.so"):
            shutil.copy2(so, clone / so.relative_to(ROOT))


def build_patched_c(clone: Path) -> str | None:
    """Compile each C source the plant changed into the clone; an error line if one does not build."""
    changed = subprocess.run(
        ["git", "diff", "--name-only", "--", "*.c"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.split()
    for source in changed:
        module = source.removesuffix(".c").replace("/", ".")
        with tempfile.TemporaryDirectory(prefix="plant-build-") as build:
            built = subprocess.run(
                [sys.executable, "-c", BUILD, module, str(clone / source), str(clone)],
                cwd=build,
                capture_output=True,
                text=True,
                check=False,
            )
        if built.returncode:
            return f"does not build: {(built.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


def replay(clone: Path, patch: str, tests: list[str]) -> tuple[str, float]:
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=clone, check=True)
    install_c_fast_path(clone)  # undoes an earlier plant's build
    applied = subprocess.run(["git", "apply", str(PLANTS / patch)], cwd=clone, capture_output=True, text=True)
    if applied.returncode:
        return f"does not apply: {applied.stderr.strip().splitlines()[0]}", 0.0
    failed_build = build_patched_c(clone)
    if failed_build:
        return failed_build, 0.0
    env = {**os.environ, "PYTHONPATH": str(clone)}
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
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
        for patch, tests in entries:
            verdict, seconds = replay(clone, patch, tests)
            bad += not verdict.startswith("caught")
            print(f"{patch:48} {seconds:6.1f}s  {verdict}", flush=True)
    print(f"{len(entries) - bad} of {len(entries)} plants caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
