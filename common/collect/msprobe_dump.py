"""One torch path of a workload dumped by msprobe's ``PrecisionDebugger`` at level L0 (every module's inputs,
parameters and outputs), run by the msprobe environment's python (``common.collect.msprobe``):

    python -m common.collect.msprobe_dump {golden|target} <dump dir> [<workload file>]

``golden`` is the workload's fp32 copy, ``target`` the same copy in fp16 via ``.half()`` (the workload itself when
it is fp16): the lab's ``torch fp32`` reference and ``torch fp16`` candidate, on the CPU. msprobe writes
``<dump dir>/step0/<proc|rank>/dump.json`` and ``dump_tensor_data/``. One path per process: ``PrecisionDebugger``
is a singleton, configured once.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import torch
    from msprobe.pytorch import PrecisionDebugger

    from common.workload import load_workload

    which, dump_dir, workload = argv[0], argv[1], (argv[2] if len(argv) > 2 else None)
    work = load_workload(workload, check=False)
    if which == "target" and work.precision == "fp16":
        model, x = work.build_model(), work.inputs()
    else:
        model, x = work.fp32_copy()
        if which == "target":
            model, x = model.half(), tuple(t.half() if t.is_floating_point() else t for t in x)
    debugger = PrecisionDebugger(task="tensor", dump_path=dump_dir, level="L0")
    debugger.start(model)
    with torch.no_grad():
        model(*x)
    debugger.stop()
    debugger.step()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
