"""The package boundaries, read from every import statement (inside functions and under TYPE_CHECKING too).

- The core (``shardstream``) imports nothing above it: not packer, streamer, the command line, torch or PIL.
- packer and streamer stand on the core and never import each other, nor the command line.
- No import cycle between modules, lazy imports counted: a cycle kept apart only by an import inside a
  function is still two modules that cannot be understood, tested or moved one without the other.
- No private (underscore) name imported from another module: what is shared has a public name.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("shardstream", "packer", "streamer", "shardstream_cli")


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
        ("from streamer import ShardDataset, Mixture, collate", {"packer", "PIL"}),
        ("import packer", {"streamer", "torch"}),
        ("from packer import pack, PackOptions", {"streamer", "torch"}),
        ("import shardstream, shardstream.format, shardstream.io", {"packer", "streamer", "torch", "PIL"}),
        ("import shardstream_cli", {"packer", "streamer", "torch", "PIL"}),
    ],
)
def test_imports_load_only_their_side(code, forbidden):
    loaded = _loaded_after(code)
    assert not loaded & forbidden, f"{code!r} loaded {sorted(loaded & forbidden)}"


class Imports:
    """Every module of the four packages, and every name each one's import statements bring in."""

    def __init__(self, root: Path = REPO) -> None:
        self.files: dict[str, tuple[Path, bool]] = {}  # dotted name -> (path, is a package's __init__)
        for package in PACKAGES:
            for path in sorted((root / package).rglob("*.py")):
                parts = list(path.relative_to(root).with_suffix("").parts)
                is_package = parts[-1] == "__init__"
                self.files[".".join(parts[:-1] if is_package else parts)] = (path, is_package)

    def statements(self, module: str) -> Iterator[tuple[int, str, str | None]]:
        """(line, the module named, the name taken from it or None) for each import in ``module``."""
        path, is_package = self.files[module]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield node.lineno, alias.name, None
            elif isinstance(node, ast.ImportFrom):
                base = module.split(".") if is_package else module.split(".")[:-1]
                if node.level:
                    base = base[: len(base) - node.level + 1]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                for alias in node.names:
                    yield node.lineno, target, alias.name

    def targets(self, module: str) -> set[str]:
        """The modules of the four packages that ``module`` imports (a submodule when named as one)."""
        found = set()
        for _, target, name in self.statements(module):
            if name is not None and f"{target}.{name}" in self.files:
                found.add(f"{target}.{name}")
            elif target in self.files:
                found.add(target)
        return found - {module}

    def top_levels(self, module: str) -> set[str]:
        return {target.split(".")[0] for _, target, _ in self.statements(module) if target}

    def cycles(self) -> list[list[str]]:
        """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
        graph = {module: sorted(self.targets(module)) for module in self.files}
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found = []
        for root in graph:
            if root in index:
                continue
            work = [(root, iter(graph[root]))]
            index[root] = low[root] = len(index)
            stack.append(root)
            on_stack.add(root)
            while work:
                node, children = work[-1]
                child = next(children, None)
                if child is not None:
                    if child not in index:
                        index[child] = low[child] = len(index)
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(graph[child])))
                    elif child in on_stack:
                        low[node] = min(low[node], index[child])
                    continue
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
        return found

    def private_imports(self) -> list[str]:
        """``from other_module import _name`` where ``_name`` is not itself a module (``_tarscan`` is)."""
        out = []
        for module in self.files:
            for line, target, name in self.statements(module):
                private = name is not None and name.startswith("_") and not name.startswith("__")
                if private and target in self.files and f"{target}.{name}" not in self.files:
                    out.append(f"{module}:{line} imports {name} from {target}")
        return out


@pytest.fixture(scope="module")
def imports() -> Imports:
    return Imports()


def test_the_core_imports_nothing_above_it(imports):
    above = {"packer", "streamer", "shardstream_cli", "torch", "torchaudio", "torchcodec", "PIL"}
    offenders = {
        module: sorted(imports.top_levels(module) & above)
        for module in imports.files
        if module.split(".")[0] == "shardstream" and imports.top_levels(module) & above
    }
    assert not offenders, f"the core imports from above it: {offenders}"


@pytest.mark.parametrize(("package", "others"), [("packer", {"streamer"}), ("streamer", {"packer"})])
def test_packer_and_streamer_never_import_each_other_nor_the_command_line(imports, package, others):
    others = others | {"shardstream_cli"}
    offenders = {m for m in imports.files if m.split(".")[0] == package and imports.top_levels(m) & others}
    assert not offenders, f"{package} imports {sorted(others)} in {sorted(offenders)}"


def test_no_import_cycles_counting_lazy_and_type_checking_imports(imports):
    assert imports.cycles() == []


def test_no_private_name_is_imported_from_another_module(imports):
    assert imports.private_imports() == []


def test_the_rules_see_imports_inside_functions_and_under_type_checking(tmp_path):
    """The checks above read what a plain ``import`` at the top would miss (their own test)."""
    package = tmp_path / "streamer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .b import g\n")
    type_checking = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import _f\n"
    (package / "b.py").write_text(type_checking)
    (package / "c.py").write_text("def h():\n    import packer.pack\n")
    found = Imports(tmp_path)
    assert found.cycles() == [["streamer.a", "streamer.b"]]
    assert found.private_imports() == ["streamer.b:3 imports _f from streamer.a"]
    assert found.top_levels("streamer.c") == {"packer"}
