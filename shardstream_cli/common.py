"""What every command shares: failing with a message and exit code, JSON output, the index argument, -q,
and help laid out by click (plain, reflowed to the terminal up to 80 columns) rather than rich's tables."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from shardstream.errors import redact_url
from shardstream.format.constants import INDEX_NAME

IndexArgument = Annotated[Path, typer.Argument(help=f"An index file or the folder holding {INDEX_NAME}.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout, for scripts.")]
# -q is --quiet on every command that draws a progress bar (tests/cli/test_help_width.py holds them to it).
QuietFlag = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]


# Every typer app of the command takes these. rich_markup_mode=None: click's plain help, which wraps at the
# terminal's width up to 80, reflows each docstring paragraph and puts a description under an option name
# too long for its column; rich's tables squeezed descriptions to ~17 columns and cut option names
# (--no-verify-med…) at 80 columns, and kept the docstrings' own line breaks.
class CommandList(TyperGroup):
    """The top-level group: its command list shows each command's whole first paragraph, wrapped, where
    click's plain help would cut it at about 60 characters with '...'."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                first = inspect.cleandoc(command.help or "").split("\n\n")[0]
                rows.append((name, " ".join(first.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


APP_SETTINGS: dict[str, Any] = {
    "rich_markup_mode": None,
    "add_completion": False,
    "pretty_exceptions_enable": False,
}


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` in red on stderr; raise the returned Exit to stop with ``code``. Every
    command's error ends here, so this is where an OSError's or ValueError's text (which does not redact
    itself, as a StreamError does) loses the URLs' credentials."""
    typer.secho(f"error: {redact_url(message)}", fg=typer.colors.RED, err=True)
    return typer.Exit(code)


@contextlib.contextmanager
def plain_warnings() -> Iterator[None]:
    """Warnings shown as ``warning: message`` on stderr while a command runs: the user's line is the
    shell's command, so the ``file:line:`` Python prefixes would name a line of the CLI. Forked
    DataLoader workers inherit it."""
    shown = warnings.showwarning

    def show(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        typer.secho(f"warning: {redact_url(str(message))}", fg=typer.colors.YELLOW, err=True)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def echo_json(doc: Any) -> None:
    typer.echo(json.dumps(doc, indent=2))


def shown_path(path: str | os.PathLike[str] | None) -> str | None:
    """A local path as every command prints it: relative to the working folder when inside it, else
    absolute, however it was given or made; URLs (and None) as they are, credentials removed."""
    if path is None:
        return None
    text = os.fspath(path)
    if "://" in text or text.startswith("pipe:"):
        return redact_url(text)
    full = os.path.abspath(text)
    here = os.getcwd()
    return os.path.relpath(full, here) if full.startswith(here.rstrip(os.sep) + os.sep) else full


def shown_paths(doc: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``doc`` with the paths under ``keys`` as ``shown_path`` prints them (for --json)."""
    return {**doc, **{key: shown_path(doc[key]) for key in keys if doc.get(key) is not None}}


def index_path(index: Path) -> Path:
    """The index file itself, given it or the folder that holds it."""
    return index / INDEX_NAME if index.is_dir() else index
