"""The workload's inference: the program mode 01 profiles *without changing it*.

There is no profiler code here on purpose: msprof (or the lab's portable launcher) wraps
this process from the outside. It runs the workload (``--workload FILE``, else
$MSPROF_LAB_WORKLOAD, else TinyMLP) 3 + 20 times, prints a host wall-clock figure, and can
save its output so the lab can check it against the reference. It only names each forward
with a range (msprof records it with ``--msproftx=on``), so the profile can be cut per forward.
"""

from __future__ import annotations

import argparse
import re
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from common.workload import FORWARD_RANGE, MEASURED_FORWARDS, WARMUP_FORWARDS, flatten_output, load_workload


def parse_device(text: str) -> int | None:
    """``cpu`` -> None; ``npu`` / ``npu:<id>`` -> the logical NPU id (0 when none is given)."""
    m = re.fullmatch(r"cpu|npu(?::([0-9]{1,2}))?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not cpu, npu or npu:<logical id>")
    return None if text == "cpu" else int(m.group(1) or 0)


def save_output(path: str, y) -> None:
    """One output tensor -> ``path`` (.npy); several (a tuple, dict ... flattened) -> ``<path>.npz``, in order."""
    arrays = [t.detach().float().cpu().numpy() for t in flatten_output(y)]
    if len(arrays) == 1:
        np.save(path, arrays[0])
    else:
        np.savez(Path(path).with_suffix(".npz"), *arrays)


@contextmanager
def npu_range(message: str):
    """An mstx range on the current stream: msprof marks it on the host *and* on the device's stream,
    so the forward's tasks run between its two device marks (torch_npu.npu.mstx.range_start/range_end)."""
    import torch_npu

    range_id = torch_npu.npu.mstx.range_start(message, torch.npu.current_stream())
    try:
        yield
    finally:
        torch_npu.npu.mstx.range_end(range_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=parse_device, default="cpu", metavar="{cpu,npu:ID}",
                        help="where to run the model: cpu, or npu:<logical device id>")
    parser.add_argument("--workload", metavar="FILE", help="workload file (default $MSPROF_LAB_WORKLOAD, else TinyMLP)")
    parser.add_argument("--save-output", metavar="PATH", help="save the last output as a .npy file")
    args = parser.parse_args()

    if args.device is not None:
        import torch_npu  # noqa: F401  (registers the "npu" device with torch)

        # The program selects its device itself; msprof profiles the device the program uses.
        torch.npu.set_device(args.device)
        device = torch.device(f"npu:{args.device}")
        sync = torch.npu.synchronize
    else:
        device, sync = torch.device("cpu"), (lambda: None)
    # Each forward is a named range: msprof_tx on the NPU; on the CPU the launcher's torch.profiler
    # records record_function ranges (and nothing at all when no profiler runs).
    marked = npu_range if args.device is not None else torch.profiler.record_function

    # check=False: the lab checked the file with a forward before it started us; that forward
    # would otherwise be profiled too, and every count would be off by one forward.
    work = load_workload(args.workload, check=False)
    model = work.build_model().to(device)
    x = tuple(t.to(device) for t in work.inputs())
    with torch.no_grad():
        for _ in range(WARMUP_FORWARDS):
            with marked(FORWARD_RANGE):
                y = model(*x)
        sync()
        start = time.perf_counter()
        for _ in range(MEASURED_FORWARDS):
            with marked(FORWARD_RANGE):
                y = model(*x)
        sync()
        elapsed = time.perf_counter() - start
    print(f"model.py: {work.name}, {MEASURED_FORWARDS} forwards on {device}, {1e3 * elapsed / MEASURED_FORWARDS:.3f} "
          f"ms each (host wall clock, after {WARMUP_FORWARDS} warm-up forwards)")
    if args.save_output:
        save_output(args.save_output, y)


if __name__ == "__main__":
    main()
