"""pytest plugin for .ci/mutation: mutmut's test-to-function map across processes, per-test timeouts.

Stats: mutmut records a test as reaching a function when the function's trampoline runs in mutmut's own
process. Here a trampoline that runs in another process (a forked DataLoader worker, or any subprocess,
through sitecustomize) appends the function's name to the file named by SHARDSTREAM_MUTATION_HITS, and
before mutmut files the current test's hits (at its teardown) the names in that file are added to them.

Timeouts: mutmut gives a mutant's whole test run one limit, from the sum of its tests' times, so a mutant
that loops forever in its first test holds a worker for many minutes. Here each test of a mutant gets its
own limit (SIGALRM, no thread: tests check that nothing runs a thread when DataLoader workers fork), from
its own time in the stats run; past it the mutant's processes end with mutmut's "timeout" exit code.

Garbage collection: only between tests. mutmut keeps its call context in a ContextVar that every trampoline
sets; a cyclic collection that starts inside ContextVar.set (it allocates) can finalize an abandoned
generator whose cleanup runs trampolines, which set the same variable again in the middle of the first set.
CPython 3.11 then crashes (a segfault, or LookupError on reset). Tests that leave streams half-read (a
restore test) made this happen within seconds.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from pathlib import Path

import pytest

HITS = os.environ.get("SHARDSTREAM_MUTATION_HITS")
# A test of a mutant may take this many times its time in the stats run, plus the constant (which covers
# session fixtures built by whichever test comes first, and a CPU shared with other work).
TEST_TIMEOUT_FACTOR = float(os.environ.get("MUTATION_TEST_TIMEOUT_FACTOR", "5"))
TEST_TIMEOUT_CONSTANT = float(os.environ.get("MUTATION_TEST_TIMEOUT_CONSTANT", "30"))
TIMEOUT_EXIT_CODE = 36  # mutmut.stats.status_by_exit_code: "timeout"


def _file_writer(path: str):
    seen: set[str] = set()

    def record(name: str, caller: str | None = None) -> None:
        if name in seen:
            return
        seen.add(name)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{name}\n".encode())  # one short O_APPEND write: whole lines, whatever the writers
        finally:
            os.close(fd)

    return record


def send_hits_to_file() -> None:
    """In a subprocess: every trampoline hit goes to the file."""
    import mutmut.mutation.trampoline as trampoline

    trampoline.record_trampoline_hit = _file_writer(HITS)


def _mutant() -> str:
    from mutmut.mutation.trampoline import get_mutant_under_test

    return get_mutant_under_test()


def _stats_mode() -> bool:
    return _mutant() == "stats"


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _timed_out(signum, frame) -> None:
    for pid in _descendants(os.getpid()):  # subprocesses and workers the test started: they would linger
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    os._exit(TIMEOUT_EXIT_CODE)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if "__mutmut_" not in _mutant():  # stats, clean and forced-fail runs are not limited
        yield
        return
    from mutmut.state import state

    took = state().duration_by_test.get(item.nodeid.removeprefix("mutants/"), 0.0)
    previous = signal.signal(signal.SIGALRM, _timed_out)
    signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT_FACTOR * took + TEST_TIMEOUT_CONSTANT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def pytest_configure(config: pytest.Config) -> None:
    from hypothesis import HealthCheck, settings

    gc.disable()  # collected between tests instead (see the module docstring); forked children inherit this

    # Mutants run slower (every call goes through a trampoline) and under a CPU shared by two mutants: a
    # hypothesis deadline would kill mutants for being slow, not wrong. Tests that set one keep it.
    settings.register_profile("mutation", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("mutation")
    if not HITS:
        return
    import mutmut.mutation.trampoline as trampoline

    if getattr(trampoline, "_hits_across_processes", False):  # pytest.main runs more than once per process
        return
    trampoline._hits_across_processes = True
    in_process = trampoline.record_trampoline_hit
    to_file = _file_writer(HITS)
    main = os.getpid()

    def record(name: str, caller: str | None = None) -> None:
        if os.getpid() == main:
            in_process(name, caller=caller)
        else:  # a forked child (DataLoader worker): its own memory is lost when it exits
            to_file(name)

    trampoline.record_trampoline_hit = record


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid: str, location: tuple) -> None:
    gc.collect()  # outside any trampoline: finalizers may run trampolines safely here


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if not HITS or not _stats_mode():
        return
    path = Path(HITS)
    try:
        names = path.read_text().split()
        path.unlink()
    except FileNotFoundError:
        return
    from mutmut.state import state

    state()._stats.update(names)
