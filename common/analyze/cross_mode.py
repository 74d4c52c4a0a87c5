"""The cross-mode verdict: read every mode's ``prof_out/`` of one run and check that they agree.

``python -m common agree [dir ...]`` (default: the four modes' ``prof_out/`` in this checkout).
Inputs are refused, with the reason, when a mode is missing, a run did not complete, or the
folders come from different backends or different runs (nox gives every mode of one
invocation the same ``run_id``). Each check (common.analyze.checks) names its numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from common.analyze import checks, families, step_bound
from common.analyze.checks import Verdict
from common.errors import LabError
from common.formats.datasets import Dataset, find_datasets
from common.formats.records import OpStat, StepTime, Task
from common.formats.rundir import REPO_ROOT, read_run_info


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
PYACL_FP32_VARIANTS = ("fp32",)
# 03 records each variant's accuracy in run_info; the tolerances are 03's own (see its infer.py):
# fp16 compute agrees with fp32 in direction (cosine >= 0.999) and to 5e-3 absolute; fp32 to 1e-3.
PYACL_TOL = {"fp16": (5e-3, 0.999), "fp32": (1e-3, 0.999)}


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
    datasets: list[Dataset] = field(default_factory=list)
    variants: dict[str, tuple[list[Task], list[OpStat]]] = field(default_factory=dict)

    @property
    def per_forward(self) -> dict[str, float]:
        return families.per_forward_counts(self.tasks, self.forwards) if self.forwards else {}


def spec_for(info: dict, folder: Path) -> ModeSpec:
    for spec in MODES:
        if info.get("mode") == spec.session:
            return spec
    raise LabError(f"{folder}: run_info.json names mode {info.get('mode')!r}, not one of the lab's four modes",
                   "give the prof_out/ folders of 01_cmdline, 02_api_AscendC, 03_api_pyAcl and 04_pyTorch")


def default_dirs(root: Path = REPO_ROOT) -> list[Path]:
    return [root / spec.folder / "prof_out" for spec in MODES]


def _load_info(folder: Path, spec: ModeSpec | None) -> dict:
    if not folder.is_dir():
        what = f"mode {spec.key} ({spec.folder}) missing: {folder} does not exist" if spec else f"{folder}: no such directory"
        raise LabError(what, f"run it first: nox -s {spec.session}" if spec else "give a mode's prof_out/")
    info = read_run_info(folder)
    if info is None:
        raise LabError(f"{folder}: no run_info.json, so its backend and run cannot be checked",
                       "agree reads output written by the lab's modes (nox -s cmdline ascendc pyacl pytorch)")
    return info


def load_mode(folder: Path, info: dict) -> ModeRun:
    """Parse one mode's folder into the tasks of its profiled forwards."""
    spec = spec_for(info, folder)
    if spec.key == "03":
        variants = {}
        for name in info.get("variants", []):
            datasets = find_datasets(folder / name)
            tasks = [t for ds in datasets for t in ds.tasks]
            variants[name] = (tasks, [s for ds in datasets for s in ds.op_statistic])
        if PYACL_DEFAULT not in variants:
            raise LabError(f"{folder}: no {PYACL_DEFAULT!r} variant in this run",
                           "run all variants: bash 03_api_pyAcl/run.sh 0 (or nox -s pyacl)")
        tasks, stats = variants[PYACL_DEFAULT]
        return ModeRun(spec, folder, info, info.get("measured_executes"), tasks, stats, variants=variants)
    datasets = find_datasets(folder)
    if spec.key == "04":
        datasets = [ds for ds in datasets if ds.kind == "torch_npu"]
        tasks = [t for ds in datasets for t in ds.tasks if t.step_id is not None]
        steps = [s for ds in datasets for s in ds.steps]
        return ModeRun(spec, folder, info, info.get("forwards"), tasks, [s for ds in datasets for s in ds.op_statistic],
                       steps, datasets)
    tasks = [t for ds in datasets for t in ds.tasks]
    forwards = info.get("forwards") if spec.key == "01" else info.get("measured_launches")
    return ModeRun(spec, folder, info, forwards, tasks, [s for ds in datasets for s in ds.op_statistic],
                   datasets=datasets)


def load_runs(dirs: list[Path], allow_mixed_runs: bool = False) -> tuple[dict[str, ModeRun], list[str]]:
    """The four modes of one run, or a LabError naming what is missing, stale or mixed; plus notes."""
    infos: dict[str, tuple[Path, dict]] = {}
    for folder in dirs:
        folder = Path(folder)
        expected = next((s for s in MODES if folder.resolve().parent.name == s.folder), None)
        info = _load_info(folder, expected)
        spec = spec_for(info, folder)
        if spec.key in infos:
            raise LabError(f"mode {spec.key} given twice: {infos[spec.key][0]} and {folder}", "give each mode once")
        infos[spec.key] = (folder, info)
    for spec in MODES:
        if spec.key not in infos:
            raise LabError(f"mode {spec.key} ({spec.folder}) missing from the inputs",
                           f"run it (nox -s {spec.session}) and pass its prof_out/ too")
    problems = [f"{k} ({info.get('start')})" for k, (_, info) in infos.items() if not info.get("completed")]
    if problems:
        raise LabError(f"incomplete run for mode {', '.join(problems)}: run_info.json says completed=false",
                       "re-run those modes; partial profiles cannot be compared")
    backends = {k: info.get("backend") for k, (_, info) in infos.items()}
    if len(set(backends.values())) > 1:
        listed = ", ".join(f"{k} {b}" for k, b in backends.items())
        raise LabError(f"mixed backends: {listed}", "run every mode on one machine and backend, in one nox command")
    notes = []
    run_ids = {k: info.get("run_id") for k, (_, info) in infos.items()}
    if len(set(run_ids.values())) > 1:
        newest = max(infos.values(), key=lambda fi: fi[1].get("start") or "")[1]
        stale = [f"{k} (run {str(r)[:8]}, {infos[k][1].get('start')})" for k, r in run_ids.items()
                 if r != newest.get("run_id")]
        what = (f"stale or mixed inputs: {', '.join(stale)} not from the newest run {str(newest.get('run_id'))[:8]} "
                f"({newest.get('start')})")
        if not allow_mixed_runs:
            raise LabError(what, "re-run all four modes in one command: nox -s cmdline ascendc pyacl pytorch -- 0 "
                                 "(or pass --allow-mixed-runs to compare them anyway)")
        notes.append(f"note: {what}; compared anyway (--allow-mixed-runs)")
    runs = {k: load_mode(folder, info) for k, (folder, info) in sorted(infos.items())}
    return runs, notes


# --- the checks ------------------------------------------------------------------------------------
def verdicts(runs: dict[str, ModeRun], expected: dict[str, int]) -> list[Verdict]:
    """The lesson checks across modes, plus per-forward counts and outputs in every mode."""
    out = [checks.check_top_family(runs[k].stats, "matmul", k) for k in ("01", "03", "04")]
    out.append(checks.check_share_agreement(
        {k: families.forward_shares(runs[k].stats) for k in ("01", "04")}, "matmul", checks.SHARE_AGREEMENT_PP))
    out.append(checks.check_family_presence(runs["03"].per_forward, "cast", True, f"03 {PYACL_DEFAULT}"))
    out += [checks.check_family_presence(runs[k].per_forward, "cast", False, k) for k in ("01", "04")]
    for k in ("01", "03", "04"):
        run = runs[k]
        out.append(checks.check_counts(run.tasks, run.forwards, expected, f"{k}, {run.forwards} forwards"))
    out.append(checks.check_kernel_per_launch(runs["02"].tasks, runs["02"].forwards, "add_custom", "elementwise", "02"))
    out.append(checks.check_sum_vs_computing(runs["04"].tasks, runs["04"].steps, "04"))
    out += output_verdicts(runs)
    return out


def output_verdicts(runs: dict[str, ModeRun]) -> list[Verdict]:
    out = [checks.check_output_file(runs[k].folder / "output.npy", k) for k in ("01", "04")]
    out.append(checks.check_program_verified(runs["02"].info, "02's host program checks every element (fp16 1 + 1 = 2.0)",
                                             "02"))
    results = runs["03"].info.get("results", {})
    for name in runs["03"].variants:
        tol, cosine = PYACL_TOL["fp32" if name in PYACL_FP32_VARIANTS else "fp16"]
        out.append(checks.check_output(results.get(name, {}).get("accuracy"), f"03 {name}", tol, cosine))
    return out


# --- the side-by-side table ------------------------------------------------------------------------
@dataclass(frozen=True)
class ModeColumn:
    """One mode's figures for the side-by-side table (numbers; rendering formats them)."""

    key: str
    label: str
    forwards: int | None
    op_us_per_forward: float | None
    shares: dict[str, float]  # forward-time shares, init excluded
    init_us: float
    per_forward: dict[str, float]
    computing_ratio: float | None
    accuracy: str
    launches: int | None = None  # 02: recorded kernel launches (one task each)


def columns(runs: dict[str, ModeRun]) -> list[ModeColumn]:
    cols = []
    for k, run in runs.items():
        forward_tasks = [t for t in run.tasks if families.op_family(t.op_type) != "init"]
        init_us = sum(t.duration_us for t in run.tasks if families.op_family(t.op_type) == "init")
        per_fwd_us = sum(t.duration_us for t in forward_tasks) / run.forwards if run.forwards else None
        summary = step_bound.summarize_steps(run.steps)
        label = run.spec.folder + (f" ({PYACL_DEFAULT})" if k == "03" else "")
        cols.append(ModeColumn(
            k, label, run.forwards, per_fwd_us, families.forward_shares(run.stats), init_us, run.per_forward,
            summary.computing_ratio if summary else None, _accuracy(run),
            len(run.tasks) if k == "02" else None,
        ))
    return cols


def _accuracy(run: ModeRun) -> str:
    if run.spec.key in ("01", "04"):
        from common.analyze.checks import output_metrics

        m = output_metrics(run.folder / "output.npy")
        return f"max abs {m['max_abs_diff']:.2g}" if m else "no output.npy"
    if run.spec.key == "02":
        return "all elements verified" if run.info.get("completed") else "not verified"
    m = run.info.get("results", {}).get(PYACL_DEFAULT, {}).get("accuracy")
    return f"max abs {m['max_abs_diff']:.2g}" if m else "N/A"


def chart_data(runs: dict[str, ModeRun], sweep: tuple[dict, str] | None = None) -> dict:
    """The numbers behind the cross-mode charts (common.render.html draws them); ``sweep`` from load_sweep."""
    from common.analyze import bounds

    data: dict = {}
    r04 = runs["04"]
    if r04.steps:
        data["steps"] = [(f"step {s.step}", s.computing_us, s.free_us) for s in r04.steps]
        data["steps_note"] = step_bound.bound_verdict(step_bound.summarize_steps(r04.steps))
    pipes = bounds.pipe_verdicts(runs["02"].tasks)
    if pipes:
        data["pipes"] = list(pipes[0].ratios.items())
        data["pipes_note"] = pipes[0].text
    variants = runs["03"].variants
    forwards = runs["03"].forwards or 1
    data["cast_variants"] = [(name, families.family_share(stats)) for name, (_, stats) in variants.items()]
    data["cast_counts"] = [(name, sum(1 for t in tasks if families.op_family(t.op_type) == "cast") / forwards)
                           for name, (tasks, _) in variants.items()]
    if sweep:
        data["sweep"], data["sweep_note"] = sweep
    return data


SWEEP_FILE = Path("04_pyTorch") / "prof_sweep" / "sweep.json"


def load_sweep(root: Path = REPO_ROOT) -> tuple[dict, str] | None:
    """The last ``nox -s sweep`` result, as chart series {batch label: [(hidden, computing share)]}."""
    import json

    path = root / SWEEP_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        series: dict[str, list[tuple[int, float]]] = {}
        for point in doc["points"]:
            series.setdefault(f"batch {point['batch']}", []).append((int(point["hidden"]), float(point["computing_ratio"])))
    except (ValueError, KeyError, TypeError):
        return None
    return series, f"from {SWEEP_FILE} ({doc.get('backend')}, {doc.get('start')}); re-run with nox -s sweep"
