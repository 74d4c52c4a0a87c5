"""The lab's findings held against what msprof-analyze's advisor reported on the same capture.

For each problem the advisor lists (its record: :mod:`common.collect.advisor_record`), the lab's rule
of the same category must be there, and its key figure must equal the advisor's: the variables, the
slow-rank differences, the bandwidths, the misaligned ops and their sizes, the small-packet counts,
the op names of each performance set, the replaceable APIs, the AI CPU and no-bound task counts, the
step summary. One :class:`Match` per problem says which figure was compared and whether it held.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.analyze.advisor import FOUND, NOT_RUN, Finding
from common.verdict import Verdict


@dataclass(frozen=True)
class Match:
    category: str  # the advisor's
    rule: str | None  # the lab's, None when it has none
    figure: str  # what was compared
    advisor: str
    lab: str
    ok: bool


def _category(text: str) -> str:
    return re.sub(r"^rank \d+ ", "", text.strip().lower())


def _sheet(record: dict, category: str) -> list[dict]:
    for name, rows in record.get("sheets", {}).items():  # the sheet's name: the category, cut to 31 characters,
        if category.startswith(re.sub(r"^Rank \d+ ", "", name)):  # after "Rank <r> " in cluster mode
            return rows
    return []


def _figures(f: Finding) -> list[dict]:
    """The finding's figures on each rank where it fired (or its one set of figures)."""
    per = f.figures.get("per_rank")
    return list(per.values()) if per else [f.figures]


def _any(f: Finding, test) -> bool:
    return any(test(fig) for fig in _figures(f))


def _perf_sets(rows: list[dict]) -> dict[str, set[str]]:
    out = {}
    for row in rows:
        kind = row.get("Type", "").removeprefix("set of ").removesuffix(" operators")
        out[kind] = {
            line.split(" Op shape:")[0].strip() for line in row.get("Description", "").splitlines() if line.strip()
        }
    return out


def _compare(category: str, problem: dict, rows: list[dict], f: Finding) -> tuple[str, str, str, bool]:
    """(figure, advisor's value, lab's value, equal) for one category."""
    if category == "environment variable issues":
        want = {r["Environment"] for r in rows}
        return (
            "variables",
            ", ".join(sorted(want)),
            ", ".join(sorted(f.figures.get("variables", []))),
            _any(f, lambda g: set(g.get("variables", [])) == want),
        )
    if category == "slow rank":
        want = {
            m[0]: float(m[1])
            for m in re.findall(r"(\w+) \n\s*has some issues.*?reached ([\d.]+)ms", problem["description"], re.S)
        }
        got = {k: v["difference_ms"] for k, v in f.figures.items() if isinstance(v, dict) and "difference_ms" in v}
        return "parts uneven (max - min, ms)", str(want or "none"), str(got or "none"), want == got
    if category == "slow link":
        want = {
            k: float(v)
            for k, v in re.findall(r"(\w+) bandwidth\(GB/s\): \n\s*The average is ([\d.]+)", problem["description"])
        }
        got = {k: v["average"] for k, v in f.figures.items() if isinstance(v, dict)}
        return (
            "average bandwidth (GB/s)",
            str(want),
            str(got),
            all(abs(got.get(k, -1) - v) < 1e-3 for k, v in want.items()),
        )
    if category == "byte alignment analysis":
        want = {r["op name"]: int(float(r["total size(Byte)"])) for r in rows}
        return (
            "misaligned ops and sizes",
            str(want),
            str(_figures(f)[0].get("ops")),
            _any(f, lambda g: g.get("ops") == want),
        )
    if category == "packet analysis":
        want = {
            link: (int(rows[0][f"{link} total count"]), int(rows[0][f"Small {link} count"]))
            for link in ("SDMA", "RDMA")
            if rows and f"{link} total count" in rows[0]
        }
        got = lambda g: {k: (v["advisor_count"], v["advisor_small"]) for k, v in g.items() if k in ("SDMA", "RDMA")}
        return (
            "ops moving data, small ones (as the advisor counts)",
            str(want),
            str(got(_figures(f)[0])),
            _any(f, lambda g: got(g) == want),
        )
    if category.endswith("operator perf analysis"):
        want = _perf_sets(rows)
        return (
            "op names per set",
            str(want),
            str(_figures(f)[0]),
            _any(f, lambda g: all(set(g.get(k, [])) == v for k, v in want.items())),
        )
    if category == "affinity api issues":
        want = {r["Affinity API"] for r in rows}
        return (
            "APIs",
            ", ".join(sorted(want)),
            str(f.figures.get("apis")),
            _any(f, lambda g: want <= set(g.get("apis", []))),
        )
    if category in ("aicpu issues", "operator no bound issues", "block dim issues"):
        want = int(problem["problem count"])
        return "task count", str(want), str(_figures(f)[0].get("count")), _any(f, lambda g: g.get("count") == want)
    if category == "overall summary":
        values = {r["Performance Index"].strip(): float(r["Duration(ms)"]) for r in rows}
        want = {
            "Computing": values.get("Computing Time"),
            "Communication": values.get("Uncovered Communication Time"),
            "Free": values.get("Free Time"),
        }
        return (
            "step parts (ms)",
            str(want),
            str(f.figures),
            all(v is None or abs(f.figures.get(k, -1) - v) <= 0.0015 for k, v in want.items()),
        )
    return "found", "reported", f.status, f.status == FOUND


def parity(record: dict, findings: list[Finding]) -> list[Match]:
    """One Match per problem of the advisor's record."""
    by_rule = {_category(f.rule): f for f in findings}
    out = []
    for problem in record.get("problems", []):
        category = _category(problem["category"])
        if category.endswith("dynamic shape issues"):
            category = "operator dynamic shape issues"
        f = by_rule.get(category)
        if f is None:
            out.append(Match(problem["category"], None, "the category", "reported", "missing", False))
            continue
        if category == "operator dynamic shape issues" and f.status == NOT_RUN:
            # the advisor calls a capture without OP State "all dynamic"; the lab says it cannot judge, and why
            out.append(
                Match(
                    problem["category"],
                    f.rule,
                    "judged",
                    "all dynamic",
                    f"not judged: {f.text}",
                    "msprof-analyze calls" in f.text,
                )
            )
            continue
        figure, advisor, lab, ok = _compare(category, problem, _sheet(record, problem["category"]), f)
        out.append(Match(problem["category"], f.rule, figure, advisor, lab, ok))
    return out


def parity_verdict(capture: str, matches: list[Match]) -> Verdict:
    """Every problem msprof-analyze's advisor reported on ``capture`` is in advise, with the same key figure."""
    bad = [m.category for m in matches if not m.ok]
    return Verdict(
        f"advise vs msprof-analyze advisor: {capture}",
        not bad,
        f"{len(matches)} problem(s) reported, each in advise with the same key figure"
        if not bad
        else f"differs or missing: {', '.join(bad)}",
    )
