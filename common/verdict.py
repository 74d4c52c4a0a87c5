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


def as_record(v: Verdict) -> dict:
    """A verdict as run_info.json keeps it (``checks``), so a report rebuilt later shows the run's own checks."""
    return {"name": v.name, "ok": v.ok, "detail": v.detail, "applicable": v.applicable}


def from_records(records: object) -> list[Verdict]:
    """The verdicts a run recorded (as_record's dicts); entries that are not such a dict are skipped."""
    if not isinstance(records, list):
        return []
    return [
        Verdict(str(r["name"]), bool(r["ok"]), str(r.get("detail", "")), bool(r.get("applicable", True)))
        for r in records
        if isinstance(r, dict) and "name" in r and "ok" in r
    ]
