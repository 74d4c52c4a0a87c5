"""``python -m common.modes.fix``: see common.modes.fix.run."""

from common.errors import run_cli
from common.modes.fix.run import main

run_cli(main)
