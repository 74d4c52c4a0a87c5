"""``python -m common.modes.ascendc build|run ...``: mode 02's entry point (build.sh and run.sh exec it)."""

from common.modes.lesson import main_of
from common.modes.ascendc.add_profile import main

main_of(main)
