"""Every Python process of a measured command notes its life here: ``python -m common.bench loop``.

``common.bench.loop`` puts this folder on the command's PYTHONPATH and names a log file in
MSPROF_LAB_PROCLOG. Each Python process then appends one JSON line when it exits: its pid and
parent, its argv, when the kernel started it (from /proc, so interpreter start-up is included),
when it exited, and how long it spent importing torch, onnx, onnxruntime and polars (the first
import of each, itself included). Standard library only; any other ``sitecustomize`` it hides
is run first. A process that ends with os._exit or a signal writes no line.
"""

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_LOG = os.environ.get("MSPROF_LAB_PROCLOG")
_WATCHED = ("torch", "onnx", "onnxruntime", "polars")
_IMPORTS: dict = {}


def _chain_hidden_sitecustomize() -> None:
    """Run the ``sitecustomize`` this one hides: the next one on sys.path *after* this folder (only those
    after it: another chaining module before it would find this one again, and the two would loop)."""
    here = [i for i, p in enumerate(sys.path) if os.path.abspath(p or os.curdir) == _HERE]
    path = sys.path[here[0] + 1 :] if here else sys.path
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _started_s() -> float | None:
    """When the kernel started this process (epoch seconds, 10 ms resolution), from /proc.

    /proc counts a process's start in clock ticks since boot (the boot-time clock); the boot's epoch
    time comes from that clock read now, not from /proc/stat's btime, which is whole seconds and
    would make every process look up to a second older than it is.
    """
    try:
        with open(f"/proc/{os.getpid()}/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class _TimeImports(importlib.abc.MetaPathFinder):
    """Times the first import of each watched top-level package (its own imports included)."""

    def find_spec(self, name, path=None, target=None):
        if name not in _WATCHED or name in _IMPORTS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)  # a probe (find_spec only) executes nothing
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            start = time.perf_counter()
            try:
                run(module)
            finally:
                _IMPORTS[name] = time.perf_counter() - start

        spec.loader.exec_module = exec_module
        return spec


def _write() -> None:
    line = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": sys.argv,
        "started": _STARTED,
        "ended": time.time(),
        "imports": _IMPORTS,
    }
    try:
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
    except OSError:
        pass


_chain_hidden_sitecustomize()
if _LOG:
    _STARTED = _started_s() or time.time()
    sys.meta_path.insert(0, _TimeImports())
    atexit.register(_write)
