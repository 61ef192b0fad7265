"""``python -m tests.benchmarks``: run :mod:`tests.benchmarks.suite` (``make bench``).

An entry point of its own, so that the ingest's worker processes, which import the main module
of the program that starts them unless it is a package's ``__main__``, do not import the suite
and the engine client with it: a ``lakehouse ingest`` worker imports only the command line.
"""

from tests.benchmarks.suite import main

main()
