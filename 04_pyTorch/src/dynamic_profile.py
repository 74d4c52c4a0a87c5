"""Mode 04, dynamic profiling — profile a training job that is already running, when you ask for it.

What you will do: run a training loop (TinyMLP, or your model with ``--model FILE``) with ``PROF_CONFIG_PATH=<folder>``
in its environment and no profiler call in the loop. The folder gets a template ``profiler_config.json``; edit it
while it runs (``"start_step"``: a step ahead of the one it printed last, ``"warmup"``, ``"active"``, ``"prof_dir"``;
on an NPU also ``"analyse": true``, or the capture stays raw, without ``ASCEND_PROFILER_OUTPUT/``, and
``"profiler_level": "Level1"``, ``"aic_metrics": "PipeUtilization"`` to match mode 04's capture).

What you will learn:
- how to profile a long job on demand: set one variable at start-up, edit one file when you want a capture;
- what the file says: ``start_step`` (N: step N; -1: the next, torch_npu 7.2.0 on; 0: never), ``warmup``, ``active``;
- what counts as a step: on an NPU, torch_npu counts the native ``torch.optim`` optimizer's ``step()``.

On an NPU the watcher is torch_npu's own (``import torch_npu`` reads the variable); torch.profiler has
none, so elsewhere section 2 does the same by hand: the same file, read once per step. Run:
``PROF_CONFIG_PATH=$PWD/prof_cfg python dynamic_profile.py [--model my_model.py] [--device cpu]`` (stops after
``--steps`` steps or at a file ``stop_job`` in that folder). Save an edit two seconds or more after the template
appeared: torch_npu's watcher starts at ``import torch_npu`` and sees a change by the file's whole-second
modification time. ``PROF_CONFIG_PATH`` needs torch_npu 6.0.RC3 or later.
"""

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch
from torch.utils._pytree import tree_leaves  # how torch.export and transformers flatten outputs

LEARNING_RATE = 0.01  # plain SGD at a fixed rate
PROGRESS_S = 1.0  # print the step number about once a second: start_step must be a step still to come
CONFIG_FILE, STOP_FILE = "profiler_config.json", "stop_job"
TEMPLATE = {
    "start_step": 0,
    "warmup": 0,
    "active": 1,
    "prof_dir": "./",
    "record_shapes": False,
    "profile_memory": False,
    "with_stack": False,
    "activities": ["CPU"],
}  # a subset of torch_npu's fields


# --- 1. the job: a plain training loop, not one profiler call in it ------------------------------------
def make_train_step(model, inputs, loss):
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)  # native torch.optim: torch_npu hooks step()
    x = inputs if len(inputs) > 1 else inputs[0]

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss(model(*inputs), x).backward()
        optimizer.step()

    return train_step


# --- 2. portable: the config-file protocol by hand, for torch.profiler --------------------------------------
class ConfigWatcher:
    """Writes the template, then at every step: is a collection running, did the file change, is it time?"""

    def __init__(self, folder: Path):
        self.path = folder / CONFIG_FILE
        if not self.path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(TEMPLATE, indent=2) + "\n")
        self.seen, self.step_num, self.prof, self.left, self.config = self.path.stat().st_mtime_ns, 0, None, 0, None

    def step(self) -> None:
        self.step_num += 1
        if self.prof is not None:  # collecting: the schedule advances; at its end the trace is written
            self.prof.step()
            self.left -= 1
            if self.left == 0:
                self.prof.stop()
                self.prof = None
            return
        if self.path.stat().st_mtime_ns != self.seen:  # changed (else one stat() per step, nothing more)
            self.seen = self.path.stat().st_mtime_ns
            self.config = {**TEMPLATE, **json.loads(self.path.read_text())}
        start = self.config["start_step"] if self.config else 0
        if start != -1 and start != self.step_num:  # 0 never starts, nor a step already past; N waits for step N
            return
        config, self.config = self.config, None
        warmup, active = int(config["warmup"]), int(config["active"])
        self.prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(wait=0, warmup=warmup, active=active, repeat=1),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(config["prof_dir"]),
            record_shapes=bool(config["record_shapes"]),
            profile_memory=bool(config["profile_memory"]),
            with_stack=bool(config["with_stack"]),
        )
        self.prof.start()  # the schedule's steps begin with the job's next step
        self.left = warmup + active


# --- 3. the model: yours with --model FILE, else TinyMLP (this block is the same in every lesson) -------------------
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


def mean_square(out, _input) -> torch.Tensor:
    """The loss of a model without loss(): the mean square of its outputs, summed."""
    return sum(t.float().square().mean() for t in tensors(out))


# --- 4. run it -------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .py file with build_model() and make_input() (default: TinyMLP)")
    npu_here = importlib.util.find_spec("torch_npu") is not None
    parser.add_argument("--device", default="npu:0" if npu_here else "cpu", help="npu:N or cpu (default: npu:0 if any)")
    parser.add_argument("--steps", type=int, default=1_000_000, help="stop after this many steps at the latest")
    args = parser.parse_args(argv)
    if args.model and not Path(args.model).is_file():
        parser.error(f"--model {args.model}: no such file")
    if not os.environ.get("PROF_CONFIG_PATH"):
        parser.error("set PROF_CONFIG_PATH=<folder> (letters, digits, underscores) before starting the job")
    folder = Path(os.environ["PROF_CONFIG_PATH"])
    model, inputs, loss = load_model(args.model)
    loss = loss or mean_square
    npu = args.device.startswith("npu")
    if npu:
        import torch_npu  # noqa: F401  (with PROF_CONFIG_PATH set, torch_npu writes the template and watches it)

        torch.npu.set_device(args.device)
    watcher = None if npu else ConfigWatcher(folder)
    step = make_train_step(model.to(args.device), tuple(t.to(args.device) for t in inputs), loss)
    began = shown = time.monotonic()
    for n in range(1, args.steps + 1):
        step()
        torch.npu.synchronize() if npu else watcher.step()  # CPU: what torch_npu's optimizer hook does on an NPU
        if time.monotonic() - shown >= PROGRESS_S:
            shown = time.monotonic()
            print(f"step {n} at {shown - began:.1f} s", flush=True)
        if (folder / STOP_FILE).exists():
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
