"""mutmut's command line, with one fix: a stray child of the in-process test runs is not taken for a mutant.

mutmut 3.8's ForkRunner reaps its mutants with ``os.wait()``, which also returns any other child of the
process: a DataLoader worker or server that one of the stats-run tests left to be collected later. It then
stops the whole run with ``KeyError: <pid>``. Here such a child is reaped and passed over.
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


if __name__ == "__main__":  # not when a spawned DataLoader worker imports this file as __mp_main__
    isolation.ForkRunner.wait_for_result = _wait_for_result
    sys.argv[0] = "mutmut"
    cli()
