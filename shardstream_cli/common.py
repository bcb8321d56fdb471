"""What every command shares: failing with a message and exit code, JSON output, the index argument."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from shardstream.errors import redact_url
from shardstream.format.constants import INDEX_NAME

IndexArgument = Annotated[Path, typer.Argument(help=f"An index file or the folder holding {INDEX_NAME}.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout, for scripts.")]


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` in red on stderr; raise the returned Exit to stop with ``code``. Every
    command's error ends here, so this is where an OSError's or ValueError's text (which does not redact
    itself, as a StreamError does) loses the URLs' credentials."""
    typer.secho(f"error: {redact_url(message)}", fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def echo_json(doc: Any) -> None:
    typer.echo(json.dumps(doc, indent=2))


def index_path(index: Path) -> Path:
    """The index file itself, given it or the folder that holds it."""
    return index / INDEX_NAME if index.is_dir() else index
