"""The benchmarks' shared harness, command line: common flags, the work folder, progress logging."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from harness import RESULTS


def log(message: str) -> None:
    """Progress goes to stderr, so stdout is the report alone."""
    print(message, file=sys.stderr, flush=True)


def add_common_flags(
    parser: argparse.ArgumentParser, *, only: tuple[str, ...], only_help: str, repeats: str, slow: str
) -> None:
    """The flags every subprocess benchmark takes; ``repeats`` and ``slow`` say which rounds they set."""
    parser.add_argument("--quick", action="store_true", help="small inputs, one round: a smoke run")
    parser.add_argument("--only", choices=only, action="append", help=only_help)
    parser.add_argument("--workdir", type=Path, help="where the generated data goes (default: a temp folder)")
    parser.add_argument("--keep-data", action="store_true", help="keep the generated data in --workdir")
    parser.add_argument("--repeats", type=int, help=f"rounds for {repeats} (default 3; quick 1)")
    parser.add_argument("--slow-repeats", type=int, help=f"rounds for {slow} (default 2; quick 1)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--no-save", action="store_true", help="print the report only")
    parser.add_argument("--child", help=argparse.SUPPRESS)


def command_line(script: str, argv: list[str] | None) -> str:
    """How this run was invoked, for the report (``script``: its path under benchmarks/)."""
    return " ".join(["python3", f"benchmarks/{script}", *(argv if argv is not None else sys.argv[1:])])


@contextlib.contextmanager
def work_folder(
    workdir: Path | None,
    keep_data: bool,
    prefix: str,
    scratch: tuple[str, ...],
    is_data: Callable[[str], bool],
) -> Iterator[Path]:
    """``workdir`` (or a new temp folder); on the way out remove ``scratch``, and the generated data
    (the entries ``is_data`` picks) unless kept in a ``workdir``; a temp folder goes entirely."""
    temp = workdir is None
    work = Path(tempfile.mkdtemp(prefix=prefix)) if workdir is None else workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        yield work
    finally:
        for name in scratch:
            shutil.rmtree(work / name, ignore_errors=True)
        if temp or not keep_data:
            for name in os.listdir(work):
                if is_data(name):
                    shutil.rmtree(work / name, ignore_errors=True)
            if temp:
                shutil.rmtree(work, ignore_errors=True)
