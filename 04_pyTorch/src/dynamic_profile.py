"""Mode 04, dynamic profiling — profile a training job that is already running, when you ask for it.

What you will do: run a training loop (TinyMLP, or your model with ``--model FILE``) with
``PROF_CONFIG_PATH=<folder>`` in its environment and no profiler call in the loop. The folder
gets a template ``profiler_config.json``; edit it while the job runs (``"start_step": -1``,
``"warmup"``, ``"active"``, ``"prof_dir"``) and the next steps are collected into ``prof_dir``.

What you will learn:
- how to profile a long job on demand: set one variable at start-up, edit one file when you want a capture;
- what the file says: ``start_step`` (-1: the next step, 0: nothing), ``warmup``, ``active``, ``prof_dir``;
- what counts as a step: on an NPU, torch_npu counts the native ``torch.optim`` optimizer's ``step()``.

On an NPU the watcher is torch_npu's own (``import torch_npu`` reads the variable). torch.profiler
has none, so on any other machine section 3 does the same by hand: the same file, read once per step.
Run: ``PROF_CONFIG_PATH=$PWD/prof_cfg python dynamic_profile.py [--model my_model.py] [--device cpu]``;
the job stops after ``--steps`` steps, or when a file ``stop_job`` appears in that folder.
"""

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

import torch
from torch.utils._pytree import tree_leaves  # how torch.export and transformers flatten outputs

LEARNING_RATE = 0.01  # plain SGD at a fixed rate
CONFIG_FILE, STOP_FILE = "profiler_config.json", "stop_job"
TEMPLATE = {"start_step": 0, "warmup": 0, "active": 1, "prof_dir": "./", "record_shapes": False,
            "profile_memory": False, "with_stack": False, "activities": ["CPU"]}  # a subset of torch_npu's fields


# --- 1. the model --------------------------------------------------------------------------------------
def tensors(output) -> list:
    """Every tensor of an output in torch's pytree order, then other objects' attributes (a dataclass, a KV cache)."""
    found = []  # tuples, lists, dicts, registered classes (ModelOutput) opened; an object: its attributes as set
    for t in tree_leaves(output):
        found += [t] if torch.is_tensor(t) else tensors([*vars(t).values()]) if hasattr(t, "__dict__") else []
    return found


def load_model(path):
    """(model, inputs, loss) from ``--model FILE``, else TinyMLP; without loss(), the outputs' mean square."""
    module = None
    if path is not None:  # <- your model here, or pass --model FILE
        sys.path.append(str(Path(path).resolve().parent))
        spec = importlib.util.spec_from_file_location("user_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    torch.manual_seed(0)
    if module is None:
        layers = [layer for _ in range(3) for layer in (torch.nn.Linear(1024, 1024), torch.nn.GELU())]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(1024, 1024))
        x = torch.randn(32, 1024, generator=torch.Generator().manual_seed(1))
    else:
        model = module.build_model()
        torch.manual_seed(1)
        x = module.make_input()
    inputs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    loss = getattr(module, "loss", None) or (lambda out, _: sum(t.float().square().mean() for t in tensors(out)))
    return model.eval(), inputs, loss


# --- 2. the job: a plain training loop, not one profiler call in it ------------------------------------
def make_train_step(model, inputs, loss):
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)  # native torch.optim: torch_npu hooks step()
    x = inputs if len(inputs) > 1 else inputs[0]

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss(model(*inputs), x).backward()
        optimizer.step()
    return train_step


# --- 3. portable: the config-file protocol by hand, for torch.profiler --------------------------------------
class ConfigWatcher:
    """Writes the template, then at every step: is a collection running, or did the file change?"""

    def __init__(self, folder: Path):
        self.path = folder / CONFIG_FILE
        if not self.path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(TEMPLATE, indent=2) + "\n")
        self.seen, self.step_num, self.prof, self.left = self.path.stat().st_mtime_ns, 0, None, 0

    def step(self) -> None:
        self.step_num += 1
        if self.prof is not None:  # collecting: the schedule advances; at its end the trace is written
            self.prof.step()
            self.left -= 1
            if self.left == 0:
                self.prof.stop()
                self.prof = None
            return
        if self.path.stat().st_mtime_ns == self.seen:  # unchanged: one stat() per step, nothing more
            return
        self.seen = self.path.stat().st_mtime_ns
        config = {**TEMPLATE, **json.loads(self.path.read_text())}
        start = config["start_step"]
        if start == 0 or 0 < start < self.step_num:  # 0 collects nothing; a step already past is ignored
            return
        warmup, active = int(config["warmup"]), int(config["active"])
        self.prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(wait=max(0, start - self.step_num - 1), warmup=warmup, active=active,
                                             repeat=1),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(config["prof_dir"]),
            record_shapes=bool(config["record_shapes"]), profile_memory=bool(config["profile_memory"]),
            with_stack=bool(config["with_stack"]))
        self.prof.start()  # the schedule's steps begin with the job's next step
        self.left = max(0, start - self.step_num - 1) + warmup + active


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
    npu = args.device.startswith("npu")
    if npu:
        import torch_npu  # noqa: F401  (with PROF_CONFIG_PATH set, torch_npu writes the template and watches it)
        torch.npu.set_device(args.device)
    watcher = None if npu else ConfigWatcher(folder)
    step = make_train_step(model.to(args.device), tuple(t.to(args.device) for t in inputs), loss)
    for _ in range(args.steps):
        step()
        torch.npu.synchronize() if npu else watcher.step()  # watcher: what torch_npu's optimizer hook does on an NPU
        if (folder / STOP_FILE).exists():
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
