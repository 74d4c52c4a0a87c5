"""Every corpus model through the card command's modes and agree: ``python -m tests.corpus [name ...]``
(tests/corpus/_runner.py runs them; tests/corpus/README.md lists them)."""

import sys
from pathlib import Path

from tests.corpus._runner import main

if __name__ == "__main__":
    sys.exit(main(Path(__file__).resolve().parent, sys.argv[1:]))
