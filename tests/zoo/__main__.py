"""The zoo, models from torchvision, timm and Hugging Face transformers, through the card command's modes and agree:
``python -m tests.zoo [name ...]`` (``nox -s zoo``).

Every file here declares the same ``REQUIRES``, so one environment of the lab's (``.nox/workload-<key>``,
common/collect/workload_env.py) holds them all: it is built first, when stale, then every model runs under it
(tests/corpus/_runner.py, the corpus's machinery).
"""

import os
import sys
from pathlib import Path

from common.collect import workload_env
from common.errors import LabError, run_cli
from common.workload.requires import declared, normalized
from tests.corpus._runner import main as run_models, models

ZOO = Path(__file__).resolve().parent


def main() -> int:
    files = models(ZOO, sys.argv[1:])
    sets = {file.name: normalized(declared(file)) for file in files}
    if len(set(sets.values())) != 1 or not next(iter(sets.values())):
        raise LabError(
            f"tests/zoo: its files must declare one REQUIRES set, found {len(set(sets.values()))} "
            f"({', '.join(f'{k}: {list(v)}' for k, v in sets.items())})"[:400],
            "give every file the same REQUIRES",
        )
    os.environ["PYTHON"] = str(workload_env.ensure(files[0], capture=False))
    print(f"zoo environment: {Path(os.environ['PYTHON']).parents[1]}", flush=True)
    return run_models(ZOO, sys.argv[1:])


if __name__ == "__main__":
    run_cli(main)
