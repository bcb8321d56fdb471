"""The Python half of .ci/mutation: per-module scratch copies, their results, the report.

    mutation_report.py modules                      the module names in [tool.mutmut.modules]
    mutation_report.py files MODULE                 the files MODULE mutates
    mutation_report.py prepare MODULE DIR           DIR: a copy of the checkout set up to mutate MODULE
    mutation_report.py collect MODULE DIR SECONDS   DIR/summary.json and DIR/survivors.txt, from mutmut's
                                                    results, and a copy in RESULTS/MODULE.json
    mutation_report.py render RESULTS REPORT        REPORT (markdown) from every RESULTS/*.json

``collect`` imports mutmut (and works in DIR, where mutmut finds its files). RESULTS (committed,
tests/mutation-results/ by default) keeps each module's last run with the sha256 of every file it
mutated and tested, so the report can say what changed since, in any checkout, without the scratch copy.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: mutmut depends on toml there
    import toml as tomllib

REPO = Path(__file__).resolve().parents[1]
EQUIVALENTS = REPO / ".ci" / "mutation-equivalents.toml"
RESULTS = Path(os.environ.get("MUTATION_RESULTS", REPO / "tests" / "mutation-results"))
# Shared test code: a change there counts as a change of every module's tests.
HELPERS = ["tests/conftest.py", "tests/servers", "tests/streamer/scripts"]

# mutmut's verdicts (mutmut.stats.status_by_exit_code), in the order the report lists them.
STATUSES = ["killed", "survived", "timeout", "no tests", "suspicious", "segfault", "not checked", "skipped"]
# Scored: everything mutmut ran or found no test for; "not checked" (the run stopped) and "skipped"
# (pragma) are not scored. A timeout is not counted as killed: under a shared CPU it can be load, not a test.
SCORED = {"killed", "survived", "timeout", "no tests", "suspicious", "segfault"}


def _config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]


def modules() -> dict[str, dict]:
    return _config()["modules"]


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def _module_pyproject(text: str, name: str) -> str:
    """pyproject.toml with [tool.mutmut] (and its sub-tables) replaced by MODULE's own settings."""
    base = {k: v for k, v in _config().items() if k != "modules"}
    module = modules()[name]
    base["only_mutate"] = module["mutate"]
    base["pytest_add_cli_args_test_selection"] = module["tests"]
    base["pytest_add_cli_args"] = [*base.get("pytest_add_cli_args", []), "-p", "mutation_hits"]
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("["):
            skipping = line.strip() in ("[tool.mutmut]",) or line.startswith("[tool.mutmut.")
        if not skipping:
            kept.append(line)
    own = [f"# written by .ci/mutation_report.py for module {name!r}", "[tool.mutmut]"]
    own += [f"{key} = {_toml_value(value)}" for key, value in base.items()]
    return "\n".join(kept).rstrip("\n") + "\n\n" + "\n".join(own) + "\n"


def _checkout_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (REPO / f).is_file()})


def _shared() -> Path | None:
    """The test data folder next to the checkout (MUTATION_SHARED, else ../shared, else ../shared of the
    checkout this one was cloned from, when that is a local folder)."""
    candidates = [os.environ.get("MUTATION_SHARED"), REPO.parent / "shared"]
    origin = subprocess.run(
        ["git", "config", "--get", "remote.origin.url"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
    if origin and Path(origin).is_dir():
        candidates.append(Path(origin).resolve().parent / "shared")
    return next((Path(c) for c in candidates if c and Path(c).is_dir()), None)


def prepare(name: str, target: Path) -> None:
    """TARGET: the checkout's files (tracked and untracked, not ignored), the built C extension, and a
    pyproject.toml whose [tool.mutmut] mutates NAME's files against NAME's tests; nothing of an earlier run
    stays."""
    if name not in modules():
        sys.exit(f"unknown module {name!r}; known: {', '.join(modules())}")
    if target.exists():
        for child in target.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    target.mkdir(parents=True, exist_ok=True)
    for rel in _checkout_files():
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest)  # mtimes kept: mutmut regenerates a mutated file only when it changed
    # The tar header fast path, so that mutants run against the package as installed; the tar tests run
    # both paths (the "python" case sets tarread._member_at to None), so Python's reader is mutated too.
    for built in (REPO / "shardstream" / "format").glob("_tarscan*.so"):
        shutil.copy2(built, target / "shardstream" / "format" / built.name)
    # tests/conftest.py looks for shared test data (foreign shards) two levels above itself; in mutmut's
    # copy that is TARGET.
    shared = _shared()
    if shared is not None:
        (target / "shared").symlink_to(shared)
    pyproject = target / "pyproject.toml"
    pyproject.write_text(_module_pyproject(pyproject.read_text(), name))


def _load_results(target: Path) -> dict[str, dict]:
    """mutant name -> {"status", "duration", "path"}, from the .meta files mutmut writes next to each
    mutated file."""
    from mutmut.stats import status_by_exit_code

    results = {}
    for meta in sorted((target / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        path = meta.relative_to(target / "mutants").as_posix()[: -len(".meta")]
        for key, code in data["exit_code_by_key"].items():
            results[key] = {
                "status": status_by_exit_code[code],
                "duration": data.get("durations_by_key", {}).get(key),
                "path": path,
            }
    return results


def _equivalents() -> dict[str, str]:
    if not EQUIVALENTS.exists():
        return {}
    return {key: entry["why"] for key, entry in tomllib.loads(EQUIVALENTS.read_text()).items()}


def collect(name: str, target: Path, seconds: float) -> None:
    os.chdir(target)  # mutmut reads pyproject.toml and mutants/ from the working directory
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    results = _load_results(target)
    counts = {status: 0 for status in STATUSES}
    for result in results.values():
        counts[result["status"]] = counts.get(result["status"], 0) + 1
    scored = sum(n for status, n in counts.items() if status in SCORED)
    stats_path = target / "mutants" / "mutmut-stats.json"
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    module = modules()[name]
    summary = {
        "module": name,
        "mutate": module["mutate"],
        "tests": module["tests"],
        "counts": counts,
        "total": len(results),
        "score": counts["killed"] / scored if scored else None,
        "seconds": round(seconds),
        "tests_run": len(stats.get("duration_by_test", {})),
        "tests_seconds": round(sum(stats.get("duration_by_test", {}).values())),
        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # The code and tests as they were run (the scratch copy's files), for the report's freshness check.
        "files": {
            name: _sha256(target / name)
            for name in sorted(_glob_files(target, [*module["mutate"], *module["tests"], *HELPERS]))
        },
        "survivors": [],
    }
    lines = [f"# {name}: {counts['killed']}/{len(results)} killed; not killed, with mutmut's diff:", ""]
    for key, result in sorted(results.items()):
        if result["status"] == "killed":
            continue
        try:
            diff = get_diff_for_mutant(key, path=result["path"])
        except Exception as exc:  # a stale meta entry: keep the name, say why there is no diff
            diff = f"(no diff: {exc!r})"
        summary["survivors"].append({"name": key, "status": result["status"], "diff": diff})
        lines += [f"## {key}: {result['status']}", diff.rstrip("\n"), ""]
    text = json.dumps(summary, indent=1, ensure_ascii=False) + "\n"
    (target / "summary.json").write_text(text)
    (target / "survivors.txt").write_text("\n".join(lines) + "\n")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(text)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _short_change(diff: str) -> str:
    """The changed lines of a diff, as `- old` / `+ new`, for a table cell."""
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    text = " / ".join(f"{line[0]} {line[1:].strip()}" for line in changed[:4])
    return text.replace("|", "\\|").replace("`", "'")


def _glob_files(root: Path, patterns: list[str]) -> set[str]:
    """The files (relative paths) under ROOT that PATTERNS name: globs of files, or folders (their .py)."""
    found: set[str] = set()
    for pattern in patterns:
        for match in root.glob(pattern.split("::")[0]):
            files = match.rglob("*.py") if match.is_dir() else [match]
            found.update(f.relative_to(root).as_posix() for f in files if "__pycache__" not in f.parts)
    return found


def _changed_since(summary: dict, patterns: list[str]) -> list[str]:
    """The files PATTERNS name that differ between the module's run (its recorded hashes) and now."""
    recorded = {n: h for n, h in summary["files"].items() if any(_matches(n, p) for p in patterns)}
    return sorted(
        name
        for name in set(recorded) | _glob_files(REPO, patterns)
        if name not in recorded or not (REPO / name).is_file() or _sha256(REPO / name) != recorded[name]
    )


def _matches(name: str, pattern: str) -> bool:
    """Does the file NAME fall under PATTERN (a glob of files, or a folder), as _glob_files reads it?"""
    pattern = pattern.split("::")[0].rstrip("/")
    return fnmatch.fnmatchcase(name, pattern) or name.startswith(pattern + "/")


def _freshness(summary: dict) -> tuple[list[str], list[str]]:
    """(code files, test files) changed since the module's run; shared test helpers count as tests."""
    return _changed_since(summary, summary["mutate"]), _changed_since(summary, [*summary["tests"], *HELPERS])


def render(results: Path, report: Path) -> None:
    summaries = {}
    for path in sorted(results.glob("*.json")):
        summary = json.loads(path.read_text())
        if summary["module"] in modules():
            summaries[summary["module"]] = summary
    fresh = {name: _freshness(s) for name, s in summaries.items()}
    equivalents = _equivalents()
    order = list(modules())
    out = [
        "# Mutation testing report",
        "",
        "Written by `.ci/mutation` (mutmut 3; configuration in `pyproject.toml`, `[tool.mutmut]`). Each",
        "module is mutated on its own, in a scratch copy, and each mutant runs against those of the",
        "module's tests that reached the mutated function (in the test process or in a subprocess).",
        'Score = killed / (killed + survived + timeout + no tests + suspicious + segfault). "With',
        'timeouts" also counts a timeout as killed: the mutant made a test hang past its limit (5x its',
        "time plus 30 s). Mutants listed in `.ci/mutation-equivalents.toml` still count as survivors; the",
        "table says why they are equivalent.",
        "",
        *_status(summaries, fresh),
        "",
        "| module | files | mutants | killed | survived | timeout | no tests | other | score | with timeouts "
        "| run time |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in order:
        s = summaries.get(name)
        if s is None:
            files = ", ".join(f"`{f}`" for f in modules()[name]["mutate"])
            out.append(f"| {name} | {files} | not run | | | | | | | | |")
            continue
        c = s["counts"]
        other = c["suspicious"] + c["segfault"] + c["not checked"] + c["skipped"]
        scored = sum(n for status, n in c.items() if status in SCORED)
        score = "n/a" if s["score"] is None else f"{100 * s['score']:.1f}%"
        with_timeouts = "n/a" if not scored else f"{100 * (c['killed'] + c['timeout']) / scored:.1f}%"
        files = ", ".join(f"`{f}`" for f in s["mutate"])
        minutes = f"{s['seconds'] // 60}m{s['seconds'] % 60:02d}s"
        out.append(
            f"| {name} | {files} | {s['total']} | {c['killed']} | {c['survived']} | {c['timeout']} "
            f"| {c['no tests']} | {other} | {score} | {with_timeouts} | {minutes} |"
        )
    out += [
        "",
        "Run time: all of `.ci/mutation MODULE` (stats, clean run, mutants), 2 mutmut children on 2 cores.",
        "The tests each module may be killed by are in `[tool.mutmut.modules]` and in its section below.",
        "",
    ]
    for name in order:
        s = summaries.get(name)
        if s is None:
            continue
        files = ", ".join(f"`{f}`" for f in s["mutate"])
        tests = ", ".join(f"`{t}`" for t in s["tests"])
        out += [
            f"## {name}",
            "",
            f"Mutated: {files}. Tests: {tests} ({s['tests_run']} tests, {s['tests_seconds']} s of test time"
            f" in the stats run). Ran {s['finished']}.",
            "",
        ]
        code, tests = fresh[name]
        if code or tests:
            changed = [f"code: {', '.join(code)}"] if code else []
            changed += [f"tests: {', '.join(tests)}"] if tests else []
            out += [f"Changed since this run: {'; '.join(changed)}.", ""]
        if not s["survivors"]:
            out += ["Every mutant killed.", ""]
            continue
        out += ["| mutant | status | change | equivalent because |", "|---|---|---|---|"]
        for survivor in s["survivors"]:
            why = equivalents.get(survivor["name"], "").replace("|", "\\|")
            change = _short_change(survivor["diff"])
            out.append(f"| `{survivor['name']}` | {survivor['status']} | `{change}` | {why} |")
        out += ["", "<details><summary>diffs</summary>", "", "```diff"]
        for survivor in s["survivors"]:
            out += [f"# {survivor['name']}: {survivor['status']}", survivor["diff"].rstrip("\n"), ""]
        out += ["```", "", "</details>", ""]
    survivors = {v["name"] for s in summaries.values() for v in s["survivors"]}
    stale = sorted(key for key in equivalents if key not in survivors)
    if stale:
        out += ["## Stale equivalents", "", "In `.ci/mutation-equivalents.toml` but not a survivor now:", ""]
        out += [f"- `{key}`" for key in stale] + [""]
    report.write_text("\n".join(out).rstrip("\n") + "\n")


def _status(summaries: dict[str, dict], fresh: dict[str, tuple[list[str], list[str]]]) -> list[str]:
    """The report's first word: does every module have a run on the code as it is now, at >= 90%?"""
    missing = [name for name in modules() if name not in summaries]
    stale = [name for name, (code, _) in fresh.items() if code]
    retested = [name for name, (code, tests) in fresh.items() if tests and not code]
    low = [name for name, s in summaries.items() if s["score"] is None or s["score"] < 0.9]
    ok = not (missing or stale or low)
    lines = [f"**Status ({datetime.now(timezone.utc):%Y-%m-%d}): {'complete' if ok else 'incomplete'}.**"]
    if not (missing or stale):
        lines.append("Every module's run is on its code as it is in this checkout.")
    if missing:
        lines.append(f"Not run: {', '.join(missing)}.")
    for name in stale:
        lines.append(f"{name}: its code changed since its run ({', '.join(fresh[name][0])}); rerun it.")
    if retested:
        lines.append(
            "Tests changed since the run (tests added since can only kill more; rerun to measure): "
            f"{', '.join(f'{n} ({len(fresh[n][1])} files)' for n in retested)}."
        )
    if low:
        lines.append(f"Below 90% killed: {', '.join(low)}.")
    return [" ".join(lines)]


def main(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command == "modules":
        print("\n".join(modules()))
    elif command == "files":
        print(" ".join(modules()[args[0]]["mutate"]))
    elif command == "prepare":
        prepare(args[0], Path(args[1]).resolve())
    elif command == "collect":
        collect(args[0], Path(args[1]).resolve(), float(args[2]))
    elif command == "render":
        render(Path(args[0]).resolve(), Path(args[1]).resolve())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
