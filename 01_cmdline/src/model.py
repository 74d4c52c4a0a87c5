"""Mode 01 — the program msprof profiles *without changing it* (black box).

What you will do: run a model's inference 3 + 20 times, then wrap this whole process in msprof
from the command line — on an NPU, from this file's folder::

    msprof --output=prof_out --ascendcl=on --runtime-api=on --task-time=on --task-memory=on \\
        --ai-core=on --aic-metrics=PipeUtilization --aicpu=on --msproftx=on \\
        python3 model.py --device npu:0 --model my_model.py

and read the CSVs msprof exports into ``prof_out/PROF_*/mindstudio_profiler_output/``.

What you will learn:
- msprof wraps a whole process: everything it runs, model set-up included, lands in the profile;
- why warm-up forwards are run first and kept apart: the first calls pay one-off costs;
- how to name a stretch of work (an mstx range) so the profile can be cut per forward.

Your model: ``--model FILE``, a Python file with ``build_model()`` and ``make_input()``; without
it, TinyMLP (4 x Linear(1024, 1024), GELU between, input [32, 1024]). Off the NPU
(``--device cpu``, the default) it runs on the CPU, and any profiler may wrap it the same way.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch.utils._pytree import tree_leaves  # how torch.export and transformers flatten outputs

WARMUP, MEASURED = 3, 20  # the first forwards allocate and fill caches: they are not measured
FORWARD_RANGE = "msprof_lab.forward"  # the name of each forward's range in the profile


# --- 1. a named range per forward --------------------------------------------------------------------
@contextmanager
def npu_range(message: str):
    """An mstx range on the current stream: msprof (``--msproftx=on``) marks it on the host and on the
    device's stream, so the forward's device tasks lie between its two device marks."""
    import torch_npu

    range_id = torch_npu.npu.mstx.range_start(message, torch.npu.current_stream())
    try:
        yield
    finally:
        torch_npu.npu.mstx.range_end(range_id)


# --- 2. the model: yours with --model FILE, else TinyMLP (this block is the same in every lesson) -------------------
class TinyMLP(torch.nn.Module):  # <- your model here, or pass --model FILE
    """4 x Linear(1024, 1024) with a GELU between each pair."""

    def __init__(self, hidden=1024):
        super().__init__()
        layers = [m for _ in range(3) for m in (torch.nn.Linear(hidden, hidden), torch.nn.GELU())]
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(hidden, hidden))

    def forward(self, x):
        return self.net(x)


def load_model(path, rows=32):
    """(model, inputs, loss) of a ``--model`` file: build_model() under seed 0, make_input() under seed 1 (a tuple
    or list: separate arguments), its loss(output, input) or None. ``path`` None: TinyMLP, ``rows`` x 1024 input."""
    module = None
    if path is not None:
        sys.path.append(str(Path(path).resolve().parent))  # the model file may import the files beside it
        spec = importlib.util.spec_from_file_location("user_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = TinyMLP() if module is None else module.build_model()
    torch.manual_seed(1)
    x = torch.randn(rows, 1024) if module is None else module.make_input()
    inputs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    return model.eval(), inputs, getattr(module, "loss", None)


def tensors(output) -> list:
    """Every tensor of an output in torch's pytree order, then other objects' attributes (a dataclass, a KV cache)."""
    found = []  # tuples, lists, dicts, registered classes (ModelOutput) opened; an object: its attributes as set
    for t in tree_leaves(output):
        found += [t] if torch.is_tensor(t) else tensors([*vars(t).values()]) if hasattr(t, "__dict__") else []
    return found


# --- 3. the program: warm-up, then the measured forwards ---------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", metavar="FILE", help="a file with build_model() and make_input() (default TinyMLP)")
    parser.add_argument("--device", default="cpu", help="cpu, or npu:<logical device id> (default cpu)")
    parser.add_argument("--save-output", metavar="PATH", help="save the last output (.npy; several outputs: .npz)")
    args = parser.parse_args()
    if args.model and not Path(args.model).is_file():
        parser.error(f"--model {args.model}: no such file")
    npu = re.fullmatch(r"npu(?::([0-9]{1,2}))?", args.device)
    if args.device != "cpu" and not npu:
        parser.error(f"--device {args.device!r} is not cpu, npu or npu:<logical device id>")

    if npu:
        import torch_npu  # noqa: F401  (registers the "npu" device with torch)

        device_id = int(npu.group(1) or 0)
        torch.npu.set_device(device_id)  # the program selects its device itself; msprof profiles the one in use
        device, sync, marked = torch.device(f"npu:{device_id}"), torch.npu.synchronize, npu_range
        if not hasattr(getattr(torch_npu.npu, "mstx", None), "range_start"):  # documented from torch_npu 6.0.RC3
            print(
                f"note: torch_npu {torch_npu.__version__} has no npu.mstx.range_start (6.0.RC3 or later): the "
                "forwards are marked with record_function, which msprof does not record",
                file=sys.stderr,
            )
            marked = torch.profiler.record_function
    else:
        device, sync, marked = torch.device("cpu"), (lambda: None), torch.profiler.record_function
    # On the CPU each forward is a record_function range: recorded by whatever torch profiler watches.
    model, x, _ = load_model(args.model)
    model, x = model.to(device), tuple(t.to(device) for t in x)
    with torch.no_grad():
        for _ in range(WARMUP):
            with marked(FORWARD_RANGE):
                y = model(*x)
        sync()
        start = time.perf_counter()
        for _ in range(MEASURED):
            with marked(FORWARD_RANGE):
                y = model(*x)
        sync()
        elapsed = time.perf_counter() - start
    print(
        f"model.py: {MEASURED} forwards on {device}, {1e3 * elapsed / MEASURED:.3f} ms each "
        f"(host wall clock, after {WARMUP} warm-up forwards)"
    )
    if args.save_output:
        arrays = [t.detach().float().cpu().numpy() for t in tensors(y)]
        if len(arrays) == 1:
            np.save(args.save_output, arrays[0])
        else:  # several outputs: one .npz beside the name given, in order
            np.savez(Path(args.save_output).with_suffix(".npz"), *arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main())
