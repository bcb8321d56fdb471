"""mutmut's command line, with two fixes for the in-process test runs (stats, clean) that mutants fork from.

A stray child is not taken for a mutant: mutmut 3.8's ForkRunner reaps its mutants with ``os.wait()``, which
also returns any other child of the process: a DataLoader worker or server that one of the stats-run tests
left to be collected later. It then stops the whole run with ``KeyError: <pid>``. Here such a child is
reaped and passed over.

A mutant does not inherit the forkserver: a stats-run test with a "forkserver" DataLoader leaves
multiprocessing's forkserver running as a child of mutmut's process, and every mutant forked after it
believed it could use that server; its ``os.waitpid`` on a process that is not its child raised
ChildProcessError, so the first forkserver test a mutant reached failed, and the mutant was counted killed
whatever it changed. Here each mutant starts its own forkserver.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime

from mutmut.__main__ import cli
from mutmut.workers import isolation


def _wait_for_result(self, timeout=None):
    if self._no_tests_results:
        return self._no_tests_results.pop(0)
    while True:
        pid, wait_status = os.wait()
        if pid in self._running:
            break
    worker = self._running.pop(pid)
    return isolation.MutantResult(
        mutant_name=worker.mutant_name,
        exit_code=os.waitstatus_to_exitcode(wait_status),
        duration=(datetime.now() - worker.start_time).total_seconds(),
    )


def _forget_the_parents_forkserver() -> None:
    from multiprocessing import forkserver

    server = forkserver._forkserver
    server._forkserver_pid = server._forkserver_address = server._forkserver_alive_fd = None


if __name__ == "__main__":  # not when a spawned DataLoader worker imports this file as __mp_main__
    os.register_at_fork(after_in_child=_forget_the_parents_forkserver)
    isolation.ForkRunner.wait_for_result = _wait_for_result
    sys.argv[0] = "mutmut"
    cli()
