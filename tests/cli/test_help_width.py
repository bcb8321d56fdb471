"""`--help` at 80 columns on every command: whole option names, descriptions wide enough to read, prose
wrapped as paragraphs, examples whole, and one meaning per short option (issue 33, item 7)."""

from __future__ import annotations

import inspect
import itertools
import os
import re
import subprocess
import sys
from typing import Any

import pytest
import typer
from typer.core import TyperOption
from typer.testing import CliRunner

from shardstream_cli import app

WIDTH = 80
# The shortest start of a description that must sit on one line: a column narrower than this is squeezed.
READABLE = 30
SECTIONS = ("Arguments:", "Options:", "Commands:", "╭")


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    """(argv before --help, the command whose help that prints) for the top level and every command,
    found from the app so that a new command is checked too. A group with a hidden default command (pack)
    prints that command's help."""
    root = typer.main.get_command(app)
    found: list[tuple[tuple[str, ...], Any]] = [((), root)]
    for name, command in root.commands.items():
        subs = getattr(command, "commands", {})
        default = next((c for c in subs.values() if c.hidden), None)
        found.append(((name,), default or command))
        found += [((name, sub), c) for sub, c in subs.items() if not c.hidden]
    return found


COMMANDS = _commands()


def _help(argv: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.output


def _prose(output: str) -> list[str]:
    """The command's own help text: the lines between the usage line and the first section."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next((i for i, line in enumerate(lines) if line.lstrip().startswith(SECTIONS)), len(lines))
    return lines[start:end]


def _readable_start(text: str) -> str:
    """The longest run of whole words from the start of ``text`` that fits in READABLE characters."""
    words = text.split()
    start = words[0]
    for word in words[1:]:
        if len(start) + 1 + len(word) > READABLE:
            break
        start += " " + word
    return start


def check_help(output: str, command: Any) -> None:
    lines = output.splitlines()
    too_long = [line for line in lines if len(line) > WIDTH]
    assert not too_long, f"lines over {WIDTH} columns: {too_long}"
    assert "…" not in output, f"something was cut:\n{output}"
    squashed = [" ".join(line.split()) for line in lines]
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        if isinstance(param, TyperOption):
            for name in [*param.opts, *param.secondary_opts]:
                whole = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
                assert whole.search(output), f"{name} is not shown whole:\n{output}"
        help_text = getattr(param, "help", None)
        if help_text:
            start = _readable_start(help_text)
            assert any(start in line for line in squashed), f"{start!r} is not on one line:\n{output}"
    prose = _prose(output)
    for line, after in itertools.pairwise(prose):
        # A line the next line's first word would have fitted on is a docstring's line break, not wrapping.
        if line.strip() and after.strip():
            assert len(line.rstrip()) + 1 + len(after.split()[0]) > WIDTH - 2, f"ragged:\n{line}\n{after}"
    for sub in getattr(command, "commands", {}).values():
        summary = " ".join(inspect.cleandoc(sub.help or "").split("\n\n")[0].split())
        assert sub.hidden or summary in " ".join(output.split()), f"summary cut: {summary!r}\n{output}"
    for paragraph in (command.help or "").split("\n\n"):
        paragraph = " ".join(paragraph.split())
        if paragraph.startswith("Example"):
            example = paragraph.split(": ", 1)[1].split(" (")[0]
            assert any(example in line for line in squashed), f"example cut: {example!r}\n{output}"


IDS = [" ".join(argv) or "shardstream" for argv, _ in COMMANDS]


@pytest.mark.parametrize("argv, command", COMMANDS, ids=IDS)
def test_help_reads_well_at_80_columns(argv, command):
    check_help(_help(argv), command)


def test_pack_help_from_the_shell_at_80_columns():
    """What the user ran: `COLUMNS=80 shardstream pack --help`, as a real process."""
    env = {**os.environ, "COLUMNS": str(WIDTH)}
    done = subprocess.run(
        [sys.executable, "-m", "shardstream_cli", "pack", "--help"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    check_help(done.stdout, dict(COMMANDS)[("pack",)])


def test_short_options_mean_one_thing_everywhere():
    """-q is --quiet on every command that has --quiet, and no short option stands for two long ones."""
    meaning: dict[str, set[str]] = {}
    for argv, command in COMMANDS:
        for param in command.params:
            if not isinstance(param, TyperOption):
                continue
            longs = [o for o in param.opts if o.startswith("--")]
            shorts = [o for o in param.opts if not o.startswith("--")]
            for short in shorts:
                meaning.setdefault(short, set()).update(longs)
            if "--quiet" in longs:
                assert "-q" in shorts, f"`shardstream {' '.join(argv)}` has --quiet without -q"
    assert all(len(longs) == 1 for longs in meaning.values()), meaning
