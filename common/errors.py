"""One error type for everything a user can get wrong, and one way to print it."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable


class LabError(Exception):
    """A user-facing failure: what is wrong, and what to do about it."""

    def __init__(self, what: str, fix: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.what} — {self.fix}" if self.fix else self.what

    def __reduce__(self):  # raised in a process pool's worker, it reaches the parent whole
        return type(self), (self.what, self.fix)


EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool stopped by a closed pipe


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM reached the lab; the program it was running has been stopped."""

    def __init__(self, signal_name: str = "SIGINT", exit_code: int = 130) -> None:
        super().__init__(signal_name)
        self.signal_name, self.exit_code = signal_name, exit_code


def run_cli(main: Callable[[], int]) -> None:
    """Run ``main`` and exit with its code; a LabError becomes one ``Error:`` line, exit 2."""
    try:
        code = main()
    except LabError as err:
        print(f"Error: {err}", file=sys.stderr)
        code = EXIT_USAGE
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as other Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot raise again
        code = EXIT_BROKEN_PIPE
    except KeyboardInterrupt as err:  # Ctrl-C, or an Interrupted raised for SIGINT / SIGTERM
        name = getattr(err, "signal_name", "SIGINT")
        print(f"Error: interrupted by {name}", file=sys.stderr)
        code = getattr(err, "exit_code", 130)
    # Leave the survivors to the exit itself: the interpreter's last garbage collection would walk
    # every object of every module loaded (0.03 s once polars is in) only to free them as it exits.
    gc.freeze()
    sys.exit(code)


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are LabErrors: one ``Error:`` line and exit 2, like every other mistake."""

    def error(self, message: str) -> None:
        raise LabError(message, f"see {self.prog} --help")
