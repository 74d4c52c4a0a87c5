"""The cross-mode verdict: every mode's ``prof_out/`` of one run, parsed, checked for agreement.

``python -m common agree [dir ...]`` (default: the four modes' ``prof_out/`` in this checkout);
:mod:`common.cli.agree` reads the folders into :class:`ModeRun`s, refusing missing, mixed or stale
inputs. A mode that ran but failed (it stopped, or its own checks did not hold) is reported as a
FAIL, and the checks that need it are left out; the others still run. Across modes only what every mode can measure is
compared: outputs against the reference, the ops 01 and 04 record per forward (one profiling
stack, one model), 03's graph against the model by FLOPs; the lesson checks are the workload's
declared expectations (``EXPECT``), "not applicable" where it declares none.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from common.analyze import checks, families
from common.analyze.bounds import step as step_bound
from common.analyze.robust import Estimate
from common.errors import LabError
from common.formats.export_facts import ExportFacts
from common.formats.outputs import SavedOutput
from common.formats.records import OpStat, StepTime, Task
from common.verdict import Verdict
from common.workload import WARMUP_FORWARDS, Expected, compare_outputs


@dataclass(frozen=True)
class ModeSpec:
    key: str
    folder: str
    session: str  # the nox session, also the "mode" its run_info.json carries


MODES = [
    ModeSpec("01", "01_cmdline", "cmdline"),
    ModeSpec("02", "02_api_AscendC", "ascendc"),
    ModeSpec("03", "03_api_pyAcl", "pyacl"),
    ModeSpec("04", "04_pyTorch", "pytorch"),
]
PYACL_DEFAULT = "default"  # the variant that follows ATC's default precision policy (Casts expected)
# 03 records each variant's accuracy per output in run_info with the tolerance its own rule gave
# (common/modes/pyacl/run.py: relative to the output's scale) and the scale it used; agree checks that
# scale against the workload's reference and applies the recorded tolerance.
WORKLOAD_MODES = ("01", "03", "04")  # the modes that profile the workload; 02 profiles a kernel of its own
FORWARD_UNIT = {"01": "forward", "03": "execute", "04": "step"}  # what one measured forward is called in each


@dataclass
class ModeRun:
    """One mode's output of one run, parsed: the tasks and op_statistic of its profiled forwards."""

    spec: ModeSpec
    folder: Path
    info: dict
    forwards: int | None
    tasks: list[Task]
    stats: list[OpStat]
    steps: list[StepTime] = field(default_factory=list)
    integrity: list[ExportFacts] = field(default_factory=list)  # the folder's exports, 03's variants too
    variants: dict[str, tuple[list[Task], list[OpStat]]] = field(default_factory=dict)
    records: list[Counter[str]] = field(default_factory=list)  # 01 / 04: the ops of each forward / step
    output: SavedOutput | None = None  # 01 / 04: the output the mode saved (output.npy), read by the loader
    # the tasks of each measured forward (01: inside its ranges; 04: per step; 03: per execute; 02: per launch):
    # medians per forward
    groups: list[list[Task]] = field(default_factory=list)

    def share_estimates(self) -> dict[str, Estimate]:
        """Each family's median share of forward time over the measured forwards (families.forward_share_estimates)."""
        return families.forward_share_estimates(self.groups)

    @property
    def per_forward(self) -> dict[str, float]:
        """Tasks per family per forward: from the forwards' own records where the mode has them (01: set-up
        outside the forward ranges is left out), else all tasks over the forwards."""
        if self.records:
            total = Counter()
            for record in self.records:
                total.update(families.family_counts_of_types(record))
            return {f: n / len(self.records) for f, n in total.items()}
        return families.per_forward_counts(self.tasks, self.forwards) if self.forwards else {}


def spec_for(info: dict, folder: Path) -> ModeSpec:
    for spec in MODES:
        if info.get("mode") == spec.session:
            return spec
    raise LabError(
        f"{folder}: run_info.json names mode {info.get('mode')!r}, not one of the lab's four modes",
        "give the prof_out/ folders of 01_cmdline, 02_api_AscendC, 03_api_pyAcl and 04_pyTorch",
    )


def mode_problem(info: dict) -> str | None:
    """What went wrong in one mode's run, from its run_info.json; None when it ran and its own checks held."""
    if info.get("failure"):  # the step that stopped it and its own error line
        return f"it stopped: {info['failure']}"
    if not info.get("completed"):
        return (
            f"it did not run to the end (exit code {info.get('exit_code')}, started {info.get('start')}): "
            "its output is partial"
        )
    if info.get("exit_code") not in (0, None) or info.get("verdicts_passed") is False:
        names = info.get("failed_checks") or []
        listed = (
            f": {'; '.join(names[:3])}" + (f" and {len(names) - 3} more" if len(names) > 3 else "") if names else ""
        )
        return f"its own checks failed (exit code {info.get('exit_code')}){listed}"
    return None


# --- the workload ----------------------------------------------------------------------------------
def _short(identity: dict | None) -> str:
    if not identity:
        return "none recorded"
    return f"{identity.get('name')} (sha256 {str(identity.get('sha256'))[:12]})"


def _cell(identity: dict | None) -> str:
    """The workload in a table cell: name and the first 12 hex digits of its sha256."""
    return (
        f"{identity.get('name')} {str(identity.get('sha256'))[:12]}" if isinstance(identity, dict) else "not recorded"
    )


def check_same_workload(infos: dict[str, dict]) -> None:
    """01, 03 and 04 (those given) ran one workload (by the sha256 in run_info.json), or a LabError naming them."""
    ids = {k: infos[k].get("workload") for k in WORKLOAD_MODES if k in infos}
    programs = [k for k in ids if infos[k].get("program")]
    if programs:
        raise LabError(
            f"mode {', '.join(programs)} profiled a program of yours "
            f"({' '.join(map(str, infos[programs[0]]['program']))}), not a workload the other modes ran",
            "agree compares one model across the modes: re-run 01 without a program after -- "
            "(nox -s cmdline ascendc pyacl pytorch -- 0 [--workload FILE])",
        )
    missing = [k for k, w in ids.items() if not (isinstance(w, dict) and w.get("sha256"))]
    if missing:
        raise LabError(
            f"run_info.json of mode {', '.join(missing)} records no workload, so it cannot be checked "
            f"that 01, 03 and 04 profiled the same model",
            "re-run the modes: nox -s cmdline ascendc pyacl pytorch -- 0 [--workload FILE]",
        )
    if len({w["sha256"] for w in ids.values()}) > 1:
        listed = ", ".join(f"{k} {_short(w)}" for k, w in ids.items())
        raise LabError(
            f"different workloads: {listed}",
            "run 01, 03 and 04 on one workload in one command: nox -s cmdline ascendc pyacl pytorch -- 0 "
            "--workload FILE (02 profiles its own kernel and is not compared on it)",
        )


def workload_line(workload: Expected) -> str:
    where = workload.path or "built in, workloads/tiny_mlp.py"
    return f"workload: {workload.name} | sha256 {workload.sha256[:12]} | {where}"


# --- the checks ------------------------------------------------------------------------------------
def verdicts(runs: dict[str, ModeRun], workload: Expected, failed: dict[str, str] | None = None) -> list[Verdict]:
    """Every mode's own outcome, then what the modes can be compared on; a check that needs a failed mode
    is left out (that mode's FAIL says why)."""
    failed = failed or {}
    out = mode_verdicts(runs, failed)
    ok = {k: run for k, run in runs.items() if k not in failed}
    if all(k in ok for k in WORKLOAD_MODES):
        out += lesson_verdicts(ok, workload)
    for k, unit, warmup in (("01", "forward", WARMUP_FORWARDS), ("04", "step", 0)):  # each tool against itself
        if k in ok:
            out.append(
                checks.check_same_records(ok[k].records, ok[k].forwards, f"{k}, {ok[k].forwards} {unit}s", unit, warmup)
            )
    if "01" in ok and "04" in ok:
        out.append(same_ops_verdict(ok["01"], ok["04"]))
    if "03" in ok:
        out += [graph_count_verdict(ok["03"]), compute_verdict(ok["03"])]
    if "02" in ok:
        out.append(checks.check_kernel_per_launch(ok["02"].tasks, ok["02"].forwards, "add_custom", "elementwise", "02"))
    if "04" in ok:
        out.append(checks.check_sum_vs_computing(ok["04"].tasks, ok["04"].steps, "04"))
    out += output_verdicts(ok, workload)
    out += integrity_verdicts(ok)
    return out


def mode_verdicts(runs: dict[str, ModeRun], failed: dict[str, str]) -> list[Verdict]:
    """One line per mode: it ran to the end and its own checks held (run_info.json), or what went wrong."""
    out = []
    for spec in MODES:
        name = f"mode {spec.key} ran and its own checks held ({spec.folder})"
        if spec.key in failed:
            out.append(Verdict(name, False, failed[spec.key]))
        elif spec.key in runs:
            info = runs[spec.key].info
            out.append(
                Verdict(name, True, f"completed, exit code {info.get('exit_code')}, started {info.get('start')}")
            )
    return out


def same_ops_verdict(r01: ModeRun, r04: ModeRun) -> Verdict:
    """01 and 04 run the same model's forward through the same profiling stack (torch.profiler here, CANN's
    on an NPU): 01's first measured forward holds the ops of 04's first active step."""
    name = "01 and 04 record the same ops per forward"
    if len(r01.records) <= WARMUP_FORWARDS or not r04.records:
        return Verdict(name, False, f"no per-forward record in {'04' if not r04.records else '01 (msprof_tx ranges)'}")
    first01, first04 = r01.records[WARMUP_FORWARDS], r04.records[0]
    if first01 == first04:
        return Verdict(
            name,
            True,
            f"{sum(first01.values())} ops each: "
            f"{', '.join(f'{op} x{n}' for op, n in first01.most_common(4))}"
            + (f" and {len(first01) - 4} more op types" if len(first01) > 4 else ""),
        )
    only01, only04 = first01 - first04, first04 - first01
    parts = ([f"only in 01: {', '.join(f'{op} x{n}' for op, n in only01.most_common(4))}"] if only01 else []) + (
        [f"only in 04: {', '.join(f'{op} x{n}' for op, n in only04.most_common(4))}"] if only04 else []
    )
    return Verdict(name, False, "; ".join(parts))


def compute_verdict(run: ModeRun) -> Verdict:
    """03's exported graph against the model by FLOPs, as 03 recorded it (common.analyze.flops.flops_verdict)."""
    name = "the exported graph computes what the model computes (03, FLOPs per family group)"
    recorded = run.info.get("compute_check")
    if not isinstance(recorded, dict):
        return Verdict(name, False, "run_info.json records no compute_check: re-run mode 03")
    return Verdict(name, bool(recorded.get("ok")), str(recorded.get("detail")), bool(recorded.get("applicable", True)))


def integrity_verdicts(runs: dict[str, ModeRun]) -> list[Verdict]:
    """The integrity checks (common.analyze.checks) of every dataset of every mode, 03's variants included:
    a file edited or cut short after the run fails agree even where the lesson checks still hold."""
    out = []
    for key, run in runs.items():
        out += [Verdict(f"{v.name} [{key}]", v.ok, v.detail) for v in checks.integrity_verdicts(run.integrity)]
    return out


def lesson_verdicts(runs: dict[str, ModeRun], workload: Expected) -> list[Verdict]:
    """The lesson checks, each one a statement the workload declares in EXPECT; N/A where it declares none.

    top_family: that family has the largest share of forward time in 01, 03 and 04.
    share_agreement_01_04: that family's share agrees between 01 and 04 (same eager ops, two collectors).
    cast_on_03_default: whether ATC's default precision policy puts Casts into 03's default model.
    """
    expect = workload.expectations
    out = [
        checks.check_declared_top_family(runs[k].stats, workload, k, runs[k].groups, FORWARD_UNIT[k])
        for k in WORKLOAD_MODES
    ]
    family = expect.get("share_agreement_01_04")
    if family is None:
        out.append(
            checks.not_applicable(
                "share of forward time agrees (01 vs 04)", workload.not_applicable("share_agreement_01_04")
            )
        )
    else:
        portable = all(runs[k].info.get("backend") == "portable" for k in ("01", "04"))
        out.append(
            checks.check_share_agreement(
                {k: runs[k].share_estimates().get(family) for k in ("01", "04")},
                family,
                {k: checks.per_call_medians(runs[k].groups) for k in ("01", "04")} if portable else None,
            )
        )
    cast = expect.get("cast_on_03_default")
    if cast is None:
        out.append(
            checks.not_applicable(
                f"cast on ATC's default path (03 {PYACL_DEFAULT})", workload.not_applicable("cast_on_03_default")
            )
        )
    else:
        out.append(checks.check_family_presence(runs["03"].per_forward, "cast", cast, f"03 {PYACL_DEFAULT}"))
    return out


def graph_count_verdict(run: ModeRun) -> Verdict:
    """03's tasks per execute match the graph it built and ran, op type by op type (03's own check, read
    back from its files: what ran is counted against the graph the runtime was given, never against the
    eager model, which an exporter and a converter rewrite)."""
    where = f"03 {PYACL_DEFAULT}, {run.forwards} executes"
    name = f"op counts per execute match the built graph ({where})"
    graph = run.info.get("results", {}).get(PYACL_DEFAULT, {}).get("graph_op_counts")
    if not isinstance(graph, dict) or not run.forwards:
        return Verdict(name, False, f"run_info.json records no graph_op_counts or executes for {PYACL_DEFAULT!r}")
    return checks.check_graph_counts(run.tasks, graph, run.forwards, name)


def output_verdicts(runs: dict[str, ModeRun], workload: Expected) -> list[Verdict]:
    """Each mode's output against the reference by the rule that mode applied itself (one rule, in one place)."""
    npu = any(run.info.get("backend") == "npu" for run in runs.values())
    out = [checks.check_output_file(runs[k].output, k, workload, npu) for k in ("01", "04") if k in runs]
    if "02" in runs:
        out.append(
            checks.check_program_verified(
                runs["02"].info, "02's host program checks every element (fp16 1 + 1 = 2.0)", "02"
            )
        )
    if "03" not in runs:
        return out
    results = runs["03"].info.get("results", {})
    reference = workload.fp32_outputs  # what 03 ran: the model, or the fp32 copy it exported
    scales = [float(abs(r).max()) if r.size else 0.0 for r in reference]
    for name in runs["03"].variants:
        recorded = results.get(name, {})
        per_output = recorded.get("accuracy_per_output") or [recorded.get("accuracy")]
        if len(per_output) != len(scales):
            out.append(
                Verdict(
                    f"output matches fp32 reference (03 {name})",
                    False,
                    f"run_info.json records {len(per_output)} output(s), {workload.name} has {len(scales)}",
                )
            )
            continue
        for i, (metrics, scale) in enumerate(zip(per_output, scales)):
            where = f"03 {name}" + (f", output {i}" if len(scales) > 1 else "")
            out.append(recorded_accuracy_verdict(metrics, scale, where))
    return out


def recorded_accuracy_verdict(metrics: dict | None, scale: float, where: str) -> Verdict:
    """03's recorded accuracy of one output, judged by the tolerance 03 recorded beside it (03's rule:
    relative to the output's scale), once the scale it used is checked against the workload's reference."""
    if not metrics or "tol" not in metrics or "scale" not in metrics:
        return checks.check_output(None, where, 0.0, 0.0)  # nothing recorded: fails, saying so
    if abs(metrics["scale"] - scale) > 1e-6 * max(1.0, scale):
        return Verdict(
            f"output matches fp32 reference ({where})",
            False,
            f"03 judged it against max|reference| {metrics['scale']:.6g}; the workload's is {scale:.6g}",
        )
    v = checks.check_output(metrics, where, metrics["tol"], metrics.get("cosine_min", 0.999))
    return Verdict(v.name, v.ok, f"{v.detail}; tolerance as 03 recorded it, for max|reference| {scale:.3g}")


# --- the side-by-side table ------------------------------------------------------------------------
@dataclass(frozen=True)
class ModeColumn:
    """One mode's figures for the side-by-side table (numbers; rendering formats them)."""

    key: str
    label: str
    forwards: int | None
    op_us_per_forward: float | None  # the median over the measured forwards where the mode records each one
    shares: dict[str, float]  # forward-time shares, init excluded: medians per forward where recorded
    init_us: float
    per_forward: dict[str, float]
    computing_ratio: float | None
    accuracy: str
    launches: int | None = None  # 02: recorded kernel launches (one task each)
    workload: str = ""  # what the mode profiled: the workload's name and hash (02: its kernel)


def columns(runs: dict[str, ModeRun], workload: Expected) -> list[ModeColumn]:
    cols = []
    for k, run in runs.items():

        def op_us(tasks: list[Task]) -> float:
            return sum(t.duration_us for t in tasks if families.op_family(t.op_type) != "init")

        init_us = sum(t.duration_us for t in run.tasks if families.op_family(t.op_type) == "init")
        # the medians over the measured forwards where the mode records each one (02: each launch): one slow forward
        # moves no figure; else all forward time over the forwards
        if run.groups:
            per_fwd_us = statistics.median(op_us(g) for g in run.groups)
            shares = {f: e.median for f, e in run.share_estimates().items()} or families.forward_shares(run.stats)
        else:
            per_fwd_us = op_us(run.tasks) / run.forwards if run.forwards else None
            shares = families.forward_shares(run.stats)
        summary = step_bound.summarize_steps(run.steps)
        label = run.spec.folder + (f" ({PYACL_DEFAULT})" if k == "03" else "")
        cols.append(
            ModeColumn(
                k,
                label,
                run.forwards,
                per_fwd_us,
                shares,
                init_us,
                run.per_forward,
                summary.computing_ratio if summary else None,
                _accuracy(run, workload),
                len(run.tasks) if k == "02" else None,
                "add_custom kernel" if k not in WORKLOAD_MODES else _cell(run.info.get("workload")),
            )
        )
    return cols


def _accuracy(run: ModeRun, workload: Expected) -> str:
    if run.spec.key in ("01", "04"):
        if run.output is None or run.output.arrays is None:
            return "no output.npy"
        try:
            m = compare_outputs(run.output.arrays, workload.outputs)
        except LabError:  # another shape than the reference: the verdict says which
            return "shape differs"
        return f"max abs {m['max_abs_diff']:.2g}"
    if run.spec.key == "02":
        return "all elements verified" if run.info.get("completed") else "not verified"
    m = run.info.get("results", {}).get(PYACL_DEFAULT, {}).get("accuracy")
    return f"max abs {m['max_abs_diff']:.2g}" if m else "N/A"


def chart_data(runs: dict[str, ModeRun], sweep: tuple[dict, str] | None = None) -> dict:
    """The numbers behind the cross-mode charts (common.render.html draws them); ``sweep`` from common.cli.agree.load_sweep."""
    from common.analyze.bounds import op as bounds

    data: dict = {}
    r04 = runs.get("04")
    if r04 and r04.steps:
        data["steps"] = [(f"step {s.step}", s.computing_us, s.free_us) for s in r04.steps]
        data["steps_note"] = step_bound.bound_verdict(step_bound.summarize_steps(r04.steps))
    pipes = bounds.pipe_verdicts(runs["02"].tasks) if "02" in runs else []
    if pipes:
        data["pipes"] = list(pipes[0].ratios.items())
        data["pipes_note"] = pipes[0].text
    if "03" in runs:
        variants = runs["03"].variants
        forwards = runs["03"].forwards or 1
        data["cast_variants"] = [(name, families.family_share(stats)) for name, (_, stats) in variants.items()]
        data["cast_counts"] = [
            (name, sum(1 for t in tasks if families.op_family(t.op_type) == "cast") / forwards)
            for name, (tasks, _) in variants.items()
        ]
    if sweep:
        data["sweep"], data["sweep_note"] = sweep[:2]
        data["sweep_x"] = sweep[2] if len(sweep) > 2 else "hidden size"
    return data
