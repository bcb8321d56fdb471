"""``stream --profile``'s output: a live line on stderr while reading, then where the time went, (80 columns).

Both read ``watch(loader).stats()`` (``streamer/stats``): the rows every process keeps in shared memory,
about a millisecond to read. Trade-off: the live line reads them at most 4 times a second on a terminal
and once every 5 s otherwise (a log wants lines, not redraws), and the loop asks the clock once per sample
to know when; numbers in the line are up to one sampler tick old.
"""

from __future__ import annotations

import sys
import textwrap
import time
from typing import Any, TextIO

from shardstream.sizes import format_size

WIDTH = 80
REDRAW = 0.25  # seconds between two redraws of the live line on a terminal
LOGGED = 5.0  # seconds between two lines when stderr is a file or a pipe
STAGES = ("open", "io", "decode", "other", "idle")
COUNTS = ("samples", "bytes", "shards", "requests", "retries", "hedges")  # then read-ahead hits/misses
NAME = 10  # the process column: "worker 255"
CELL = 12  # a stage's column: " 12.345 100%"
WALL = WIDTH - 1 - NAME - CELL * len(STAGES)


class LiveLine:
    """Samples/s, MB/s, the exposed wait and the verdict's code so far, on ``file`` (stderr): redrawn in
    place on a terminal, a new line every ``LOGGED`` seconds elsewhere; ``shown`` False draws nothing."""

    def __init__(self, watched: Any, *, shown: bool = True, file: TextIO | None = None) -> None:
        self.watched = watched
        self.file = file if file is not None else sys.stderr
        self.shown = shown
        self.terminal = self.file.isatty()
        self.started = time.monotonic()
        # On a terminal the first line comes with the first sample; in a log, after LOGGED seconds.
        self.due = self.started if self.terminal else self.started + LOGGED
        self.drawn = False

    def tick(self, count: int) -> None:
        """After each sample: draws when it is time (``count``: samples read so far)."""
        if not self.shown:
            return
        now = time.monotonic()
        if now >= self.due:
            self.draw(count, now)
            self.due = now + (REDRAW if self.terminal else LOGGED)

    def close(self, count: int) -> None:
        """The last numbers, and the line ended, so that what follows starts on its own line."""
        if self.shown and self.terminal and self.drawn:
            self.draw(count, time.monotonic())
            self.file.write("\n")
            self.file.flush()

    def draw(self, count: int, now: float) -> None:
        stats = self.watched.stats()
        elapsed = max(now - self.started, 1e-9)
        text = (
            f"{elapsed:6.1f}s  {count / elapsed:,.0f} samples/s  "
            f"{stats['total']['counts']['bytes'] / elapsed / 1e6:,.1f} MB/s  "
            f"exposed wait {stats['trainer']['exposed']:.0%}  {stats['verdict']['code']}"
        )[: WIDTH - 1]  # a terminal wraps a line of its full width, and \r then redraws only the last part
        if self.terminal:
            self.file.write(f"\r{text}\x1b[K")
        else:
            self.file.write(text + "\n")
        self.file.flush()
        self.drawn = True


def breakdown(stats: dict[str, Any]) -> list[str]:
    """The lines ``stream --profile`` prints: stages per process, decoding by kind, counts, the shuffle
    buffer's fill, the trainer's wait and the verdict; none over ``WIDTH`` columns."""
    rows = _named(stats)
    lines = ["where the time went (seconds, % of each process's wall time):"]
    lines.append(f"{'process':<{NAME}}" + "".join(f"{s:>{CELL}}" for s in STAGES) + f"{'wall':>{WALL}}")
    for name, row in rows:
        wall = row["wall"]
        cells = "".join(_cell(row["seconds"][s], wall) for s in STAGES)
        lines.append(f"{name:<{NAME}}{cells}{_seconds(wall):>{WALL}}")
    waits = [(name, row["seconds"].get("cpu_wait", 0.0), row["wall"]) for name, row in rows]
    if any(seconds > 0 for _, seconds, _ in waits):  # the rest of each row's wall time: ready, no CPU
        parts = ", ".join(f"{name} {_seconds(s)} s ({s / w:.0%})" for name, s, w in waits if w > 0)
        lines += ["", *_wrapped(f"waiting for a CPU (ready to run): {parts}", indent=2)]
    total = stats["total"]
    decoded = sum(total["decode"].values())
    if decoded > 0:
        kinds = sorted((k for k, s in total["decode"].items() if s > 0), key=lambda k: -total["decode"][k])
        parts = ", ".join(
            f"{k} {_seconds(total['decode'][k])} s ({total['decode'][k] / decoded:.0%})" for k in kinds
        )
        lines += ["", *_wrapped(f"decode by kind: {parts}", indent=2)]
    lines += ["", *_counts(rows)]
    lines += [
        "",
        f"shuffle buffer fill: {_seconds(total['fill_seconds'])} s (an epoch's start to its first sample)",
    ]
    if "main" not in stats["workers"]:
        lines.append(
            f"hand-off: {_seconds(total['handoff'])} s of CPU (workers pickling and sending batches)"
        )
    lines += ["", *_trainer(stats.get("trainer"))]
    verdict = stats["verdict"]
    lines.append("")
    lines += _wrapped(f"verdict: {verdict['code']}: {verdict['text']}", indent=9)
    return lines


def _named(stats: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The rows to show: the main process, the workers by number, and their total when more than one."""
    workers = stats["workers"]
    order = sorted(workers, key=lambda n: -1 if n == "main" else int(n))
    rows = [("main" if n == "main" else f"worker {n}", workers[n]) for n in order]
    if len(rows) > 1:
        rows.append(("total", stats["total"]))
    return rows


def _cell(seconds: float, wall: float) -> str:
    share = f"{seconds / wall:.0%}" if wall > 0 else "-"
    return f"{_seconds(seconds):>{CELL - 5}} {share:>4}"


def _counts(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The counts table, each column as wide as its widest cell, two spaces apart where that fits in
    ``WIDTH``, else one; counts past that (billions of samples) shortened to 3 figures (``15.2M``)."""
    for number in (_whole, _short):
        table = [["counts", *COUNTS, "read-ahead hit/miss"]]
        for name, row in rows:
            counts = row["counts"]
            cells = [format_size(counts[k]) if k == "bytes" else number(counts[k]) for k in COUNTS]
            ahead = f"{number(counts['readahead_hits'])}/{number(counts['readahead_misses'])}"
            table.append([name, *cells, ahead])
        widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
        for gap in (2, 1):
            if sum(widths) + gap * (len(widths) - 1) < WIDTH:
                return [_aligned(line, widths, gap) for line in table]
    return [_aligned(line, widths, 1) for line in table]


def _aligned(line: list[str], widths: list[int], gap: int) -> str:
    """The first cell to the left, the others to the right of their columns."""
    cells = [line[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True))]
    return (" " * gap).join(cells)


def _whole(count: int) -> str:
    return f"{count:,}"


def _short(count: int) -> str:
    """``987``, ``15.2k``, ``15.2M``, ``1.5G``: at most 5 characters up to 999G."""
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if count >= scale:
            value = count / scale
            return f"{value:.1f}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return str(count)


def _trainer(trainer: dict[str, Any] | None) -> list[str]:
    if not trainer or not trainer.get("steps"):
        return []
    waited, stepped = trainer["wait_seconds"], trainer["step_seconds"]
    said = (
        f"trainer: {trainer['steps']:,} steps, first batch {_duration(trainer['first_wait'])} "
        "(workers starting, buffer filling)",
        f"exposed data wait after it: {trainer['exposed']:.0%} ({_seconds(waited)} s of "
        f"{_seconds(waited + stepped)} s)",
        f"wait per batch p50 {_duration(trainer['wait_p50'])}, p99 {_duration(trainer['wait_p99'])}",
    )
    lines = _wrapped(said[0], indent=9)
    for part in said[1:]:
        lines += _wrapped(part, indent=9, first=9)
    return lines


def _wrapped(text: str, indent: int, first: int = 0) -> list[str]:
    return textwrap.wrap(
        text, WIDTH, initial_indent=" " * first, subsequent_indent=" " * indent, break_on_hyphens=False
    )


def _seconds(value: float) -> str:
    """Seconds with 4 significant figures up to 9999 (``0.0123``, ``12.35``, ``1234``)."""
    for limit, digits in ((1, 4), (10, 3), (100, 2), (1000, 1)):
        if value < limit:
            return f"{value:.{digits}f}"
    return f"{value:.0f}"


def _duration(value: float) -> str:
    """A wait in the unit that reads best: ``75 us``, ``12.5 ms``, ``1.20 s``, ``3600 s``."""
    if value < 1e-3:
        return f"{value * 1e6:.0f} us"
    if value < 1:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"
