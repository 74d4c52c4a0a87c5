"""``python -m common.modes.pytorch``: mode 04 (04_pyTorch/run.sh)."""

from common.modes.lesson import main_of
from common.modes.pytorch.model import main

main_of(main)
