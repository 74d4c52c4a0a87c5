"""Run a command of the lab with common/analyze/ and common/render/ fenced off from files and models
(tests/unit/test_analyze_is_pure.py): they take records, the layers below read them.

Every module of common/analyze/ and common/render/ is imported first and each function it defines (module-level, and the methods of
its classes) wrapped: while one runs, opening, listing or stat-ing a path, connecting to a database, starting a
program or calling a torch module raises ``Touched`` — whatever the call went through (a lazy property of an
object handed in, a helper of formats/). Only then is the rest of the lab imported, so every caller binds the
wrapped functions, and the command runs: ``python analyze_guard.py report DIR`` is ``python -m common report DIR``,
``python analyze_guard.py --module common.modes.cmdline 0`` runs mode 01 (its lesson, a program of its own, is
not fenced). A touch is printed as ``TOUCHED: <function>: <call>`` and ends the program with exit code 99.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import importlib.util
import inspect
import io
import os
import pkgutil
import sqlite3
import subprocess
import sys
import threading

import common.analyze
import common.render

INSIDE = threading.local()  # the fenced function running now, outermost first
FENCED = (common.analyze, common.render)


class Touched(BaseException):  # not an Exception: no `except Exception` in the lab may swallow it
    pass


def _fenced(function, name: str):
    @functools.wraps(function)
    def fenced(*args, **kwargs):
        stack = INSIDE.__dict__.setdefault("stack", [])
        stack.append(name)
        try:
            return function(*args, **kwargs)
        finally:
            stack.pop()

    return fenced


def _guard(call, what: str):
    @functools.wraps(call)
    def guarded(*args, **kwargs):
        stack = getattr(INSIDE, "stack", None)
        if stack:
            raise Touched(f"{stack[0]}: {what}({', '.join(map(repr, args[:2]))})")
        return call(*args, **kwargs)

    return guarded


def fence_analyze() -> int:
    """Wrap every function common/analyze/ and common/render/ define; their count."""
    wrapped = 0
    names = [
        info.name for package in FENCED for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
    ]
    for name in names:
        module = importlib.import_module(name)
        for attr, value in list(vars(module).items()):
            if inspect.isfunction(value) and value.__module__ == module.__name__:
                setattr(module, attr, _fenced(value, f"{module.__name__}.{attr}"))
                wrapped += 1
            elif inspect.isclass(value) and value.__module__ == module.__name__:
                for method, member in list(vars(value).items()):
                    if inspect.isfunction(member) and not method.startswith("__"):
                        setattr(value, method, _fenced(member, f"{module.__name__}.{value.__name__}.{method}"))
                        wrapped += 1
    return wrapped


def fence_files() -> None:
    builtins.open = io.open = _guard(io.open, "open")
    for name in ("open", "stat", "lstat", "scandir", "listdir"):
        setattr(os, name, _guard(getattr(os, name), f"os.{name}"))
    sqlite3.connect = _guard(sqlite3.connect, "sqlite3.connect")
    subprocess.Popen.__init__ = _guard(subprocess.Popen.__init__, "subprocess.Popen")
    try:
        import polars  # its readers open files in Rust, past Python's open()
    except ImportError:
        return
    for name in ("read_csv", "scan_csv", "read_csv_batched", "read_parquet", "scan_parquet", "read_database_uri"):
        if hasattr(polars, name):
            setattr(polars, name, _guard(getattr(polars, name), f"polars.{name}"))


def fence_models() -> None:
    """A model run inside analyze/ (the harness computes a reference, and passes it in): torch imported now, where
    it is installed, so that a module called later, by whatever path, meets the fence."""
    if importlib.util.find_spec("torch") is None:
        return
    import torch

    torch.nn.Module.__call__ = _guard(torch.nn.Module.__call__, "torch.nn.Module.__call__")


def main(argv: list[str]) -> int:
    count = fence_analyze()
    fence_files()
    if argv[:1] == ["--module"]:
        lab, argv = importlib.import_module(argv[1]).main, argv[2:]
    else:
        from common.cli.commands import main as lab
    from common.errors import LabError

    fence_models()
    print(f"analyze_guard: {count} functions of common/analyze/ and common/render/ fenced", file=sys.stderr)
    try:
        return lab(argv)
    except Touched as touched:
        print(f"TOUCHED: {touched}", flush=True)
        return 99
    except LabError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
