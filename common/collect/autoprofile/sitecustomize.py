"""Whole-life profiling of an unchanged Python program: the portable stand-in for ``msprof <app>``.

``common.collect.launcher`` puts this folder first on the child's PYTHONPATH and sets
MSPROF_LAB_AUTOPROFILE_DIR. Python then imports this module at start-up, before the program.
It waits for the program to import torch, starts torch.profiler right then (so no op is
missed), and at exit writes the op tree of this process to ``<dir>/<pid>.json``. Child
processes inherit the environment, so each one profiles itself the same way.

SIGTERM (sent by the lab at a timeout or when the lab itself is stopped, or by anyone else)
would by default end the process at once, without running atexit handlers: the profile
would be lost. Once the profiler runs, this module therefore turns SIGTERM into
``SystemExit(143)`` (128 + 15, the status a shell shows for SIGTERM): the program unwinds as
on any exit (``finally`` blocks, atexit), the profile is written, and the exit code still says
SIGTERM. A program that installs its own SIGTERM handler keeps it. SIGINT needs nothing:
Python already raises KeyboardInterrupt, unwinds, and then ends by SIGINT.

Only the standard library and torch are used: the program's own ``common`` or other
packages are never shadowed. Without the variable this module only chains to any other
``sitecustomize`` it hides.
"""

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_OUT_DIR = os.environ.get("MSPROF_LAB_AUTOPROFILE_DIR")


def _chain_hidden_sitecustomize() -> None:
    """Run the ``sitecustomize`` this one hides: the next one on sys.path *after* this folder (only those
    after it: another chaining module before it would find this one again, and the two would loop)."""
    here = [i for i, p in enumerate(sys.path) if os.path.abspath(p or os.curdir) == _HERE]
    path = sys.path[here[0] + 1 :] if here else sys.path
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec and spec.loader and spec.origin and os.path.dirname(os.path.abspath(spec.origin)) != _HERE:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _plain(values) -> list:
    """An op's scalar arguments (``concrete_inputs``) as JSON values; anything else None."""
    simple = (bool, int, float, str, type(None))
    return [
        v
        if isinstance(v, simple)
        else list(v)
        if isinstance(v, (list, tuple)) and all(isinstance(x, simple) for x in v)
        else None
        for v in (values or [])
    ]


def _flatten(events) -> list:
    index = {id(e): i for i, e in enumerate(events)}
    flat = []
    for e in events:
        parent = e.cpu_parent
        flat.append(
            {
                "name": e.name,
                "start": e.time_range.start,
                "end": e.time_range.end,
                "parent": index.get(id(parent), -1) if parent is not None else -1,
                "shapes": [list(s) if isinstance(s, (list, tuple)) else [] for s in (e.input_shapes or [])],
                "dtypes": [str(d) for d in (e.input_dtypes or [])],
                "range": bool(getattr(e, "is_user_annotation", False)),
                "concrete": _plain(getattr(e, "concrete_inputs", None)),
            }
        )
    return flat


def _dump(prof, started_ns: int) -> None:
    if signal.getsignal(signal.SIGTERM) is _exit_on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the write short
    try:
        prof.__exit__(None, None, None)
        events = prof.function_events
        record = {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "argv": sys.argv,
            "trace_start_us": prof.kineto_results.trace_start_ns() / 1000.0,
            "wall_us": (time.time_ns() - started_ns) / 1000.0,
            "nodes": _flatten(events),
            # what this torch says about the trace's op names, so the lab need not import torch to read it
            "decomposes": _dispatch_facts().table(sys.modules["torch"], (e.name for e in events)),
        }
        final = os.path.join(_OUT_DIR, f"{os.getpid()}.json")
        with open(final + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(final + ".tmp", final)
    except Exception as err:  # noqa: BLE001 (the program's own exit status must win; say what was lost)
        print(f"msprof lab: could not save the profile of pid {os.getpid()}: {err}", file=sys.stderr)


def _dispatch_facts():
    """``common/collect/dispatch_facts.py``, loaded by path under a private name (sys.path stays as it was)."""
    path = os.path.join(os.path.dirname(_HERE), "dispatch_facts.py")
    spec = importlib.util.spec_from_file_location("_msprof_lab_dispatch_facts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _start(torch_module) -> None:
    started_ns = time.time_ns()
    # torch.autograd.profiler.profile: the profiler torch.profiler.profile drives, with the same events;
    # started directly because torch.profiler's start imports torch._inductor (seconds) to look for CUDA graphs.
    prof = torch_module.autograd.profiler.profile(use_cpu=True, record_shapes=True)
    prof.__enter__()
    atexit.register(_dump, prof, started_ns)  # registered after torch's own hooks, so it runs before them
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # an inherited SIG_IGN, or the program's own, stays
        try:
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
        except ValueError:  # torch imported outside the main thread: handlers can only be set from it
            pass


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Lets the normal finders load torch, then starts the profiler once torch is complete."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            _start(module)

        spec.loader.exec_module = exec_module
        return spec


_chain_hidden_sitecustomize()
if _OUT_DIR and "torch" not in sys.modules:
    sys.meta_path.insert(0, _AfterTorchImport())
