"""``python -m common.modes.pyacl [device] [variant|all] [--acl-prof] [--workload FILE] [--threads N]``: run.sh."""

from common.modes.lesson import main_of
from common.modes.pyacl.run import main

main_of(main)
