"""TinyMLP inference: the program mode 01 profiles *without changing it*.

There is no profiler code here on purpose: msprof (or the lab's portable launcher) wraps
this process from the outside. It runs the shared workload 3 + 20 times, prints a host
wall-clock figure, and can save its output so the lab can check it against the reference.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from common.workload import MEASURED_FORWARDS, WARMUP_FORWARDS, build_model, make_input


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "npu"], default="cpu", help="where to run the model")
    parser.add_argument("--save-output", metavar="PATH", help="save the last output as a .npy file")
    args = parser.parse_args()

    if args.device == "npu":
        import torch_npu  # noqa: F401  (registers the "npu" device with torch)

        device = torch.device("npu:0")  # the lab sets ASCEND_RT_VISIBLE_DEVICES, so the card is logical 0
        sync = torch.npu.synchronize
    else:
        device, sync = torch.device("cpu"), (lambda: None)

    model = build_model().to(device)
    x = make_input().to(device)
    with torch.no_grad():
        for _ in range(WARMUP_FORWARDS):
            y = model(x)
        sync()
        start = time.perf_counter()
        for _ in range(MEASURED_FORWARDS):
            y = model(x)
        sync()
        elapsed = time.perf_counter() - start
    print(f"model.py: {MEASURED_FORWARDS} forwards on {device}, {1e3 * elapsed / MEASURED_FORWARDS:.3f} ms each "
          f"(host wall clock, after {WARMUP_FORWARDS} warm-up forwards)")
    if args.save_output:
        np.save(args.save_output, y.float().cpu().numpy())


if __name__ == "__main__":
    main()
