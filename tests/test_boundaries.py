"""The package boundaries: packer and streamer stand on the core and never import each other."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _loaded_after(code: str) -> set[str]:
    """Top-level modules in sys.modules after ``code`` runs in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    command = [sys.executable, "-c", probe]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return set(json.loads(result.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("code", "forbidden"),
    [
        ("import streamer", {"packer", "PIL", "torch"}),
        ("from streamer import ShardDataset, SampleReader, ShuffleBuffer", {"packer", "PIL"}),
        ("import packer", {"streamer", "torch"}),
        ("from packer import pack, PackOptions", {"streamer", "torch"}),
        ("import shardstream, shardstream.format, shardstream.cli", {"packer", "streamer", "torch", "PIL"}),
    ],
)
def test_imports_load_only_their_side(code, forbidden):
    loaded = _loaded_after(code)
    assert not loaded & forbidden, f"{code!r} loaded {sorted(loaded & forbidden)}"


def _imported_packages(package: str) -> dict[str, set[str]]:
    """For each module of ``package``: the top-level packages its import statements name (lazy ones too)."""
    found = {}
    for path in sorted((REPO / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(REPO))] = names
    return found


@pytest.mark.parametrize(("package", "other"), [("packer", "streamer"), ("streamer", "packer")])
def test_packer_and_streamer_never_import_each_other(package, other):
    offenders = {path for path, names in _imported_packages(package).items() if other in names}
    assert not offenders, f"{package} imports {other} in {sorted(offenders)}"


def test_the_core_imports_packer_and_streamer_only_where_a_command_runs():
    """The format, errors and sizes know nothing of either consumer; only the CLI and the demo use them."""
    allowed = ("shardstream/cli/", "shardstream/demo/")
    for path, names in _imported_packages("shardstream").items():
        if not path.startswith(allowed):
            assert not names & {"packer", "streamer", "torch"}, f"{path} imports {sorted(names)}"
