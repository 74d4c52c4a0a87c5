"""The verdict every check returns: what was compared, the numbers, and whether it held.

It lives below every layer (formats, analyze, collect, render, cli) so each can pass verdicts
on without importing another layer. A failing verdict fails the run that made it; a check with
nothing to compare with is "not applicable": shown as [N/A], never a failure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """One check: what was compared, the numbers, and whether it held (``applicable`` false: [N/A])."""

    name: str
    ok: bool
    detail: str
    applicable: bool = True


def not_applicable(name: str, reason: str) -> Verdict:
    """A check that has nothing to compare with: reported, never failed. ``reason`` starts "not applicable: "."""
    return Verdict(name, True, reason, applicable=False)
