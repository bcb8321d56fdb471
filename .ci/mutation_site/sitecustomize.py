"""Loaded by every Python process that .ci/mutation starts (it is on their PYTHONPATH), and by nothing else.

mutmut 3 learns which tests reach which function by counting trampoline hits in its own process, so a
function reached only in a subprocess (the CLI run with ``python -m``, a torchrun rank, a spawned DataLoader
worker) would get no tests and its mutants none to kill them. While mutmut collects those stats
(``MUTANT_UNDER_TEST=stats``), this sends each such process's hits to a file that the pytest plugin
``mutation_hits`` credits to the test that started it.
"""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats" and os.environ.get("SHARDSTREAM_MUTATION_HITS"):
    try:
        import mutation_hits

        mutation_hits.send_hits_to_file()
    except Exception as exc:  # never break the process under test; the test just loses this credit
        import sys

        print(f"mutation_hits: subprocess hits not recorded: {exc!r}", file=sys.stderr)
