# TEST DOUBLE entry point: ``python -m tests.npu_dryrun [device] [--out DIR]`` runs the NPU dry run; tests only.
import sys

from tests.npu_dryrun.driver import main

sys.exit(main())
