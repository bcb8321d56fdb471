"""Streamer benchmark, profiles (``--profile``, ``--only profile``): cProfile of our in-process readers.

One child per case, as the benchmark's own counting children, with the profiler on around the reading loop
only; the text goes to ``results/stream-<stamp>-profile.txt`` (or stdout with ``--no-save``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from harness import SOURCE_PACKAGES, Run
from harness.cli import log
from stream_data import Packed

RunSpec = Callable[[str, str, dict[str, Any]], Run]


def _profile_cases(tiny: Packed | None, jpeg: Packed | None, side: int) -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []
    if tiny is not None:
        cases.append(("tiny, raw", {"kind": "ours", "index": tiny.index, "options": {"decode": False}}))
        cases.append(
            ("tiny, json decoded", {"kind": "ours", "index": tiny.index, "options": {"decode": True}})
        )
    if jpeg is not None:
        ours = {"kind": "ours", "index": jpeg.index}
        cases.append(("JPEG, raw", {**ours, "options": {"decode": False}}))
        cases.append(('JPEG, image="torch"', {**ours, "options": {"image": "torch"}}))
        cases.append(
            (
                f'JPEG, image="torch", image_size={side}',
                {**ours, "options": {"image": "torch", "image_size": side}},
            )
        )
        cases.append(("webdataset, JPEG, raw", {"kind": "wds", "pattern": jpeg.pattern}))
    if tiny is not None:
        cases.append(("webdataset, tiny, raw", {"kind": "wds", "pattern": tiny.pattern}))
    return cases


def profile_ours(
    tiny: Packed | None, jpeg: Packed | None, side: int, run_spec: RunSpec, fingerprint: str
) -> str:
    """cProfile of our in-process contenders (and webdataset's raw reader), sorted by tottime.

    The profiler runs inside the child around the counting loop only, as ``python -m cProfile -s tottime``
    would but without the ~3 s of imports, which drown a 0.2 s loop. Times are inflated by the profiler.
    ``run_spec(title, "count", spec)`` runs one child; ``fingerprint`` names the sources it imports.
    """
    text = [
        f"# Profiles, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}, {'+'.join(SOURCE_PACKAGES)} "
        f"source sha256 {fingerprint}\n\ncProfile around the counting loop only (imports "
        "excluded), in process, sorted by tottime; the profiler inflates every Python call, so compare rows, "
        "not totals.\n"
    ]
    for title, spec in _profile_cases(tiny, jpeg, side):
        log(f"[profile] {title}")
        run = run_spec(title, "count", {**spec, "profile": 30})
        stats = run.extra["profile"]
        body = stats[stats.find("   Ordered by") :] if "Ordered by" in stats else stats
        text.append(
            f"## {title}\n\n{run.samples:,} samples in {run.seconds:.2f} s under the profiler "
            f"(streamer from {run.extra['source_files'].get('streamer')})\n\n{body.rstrip()}\n"
        )
    return "\n".join(text)
