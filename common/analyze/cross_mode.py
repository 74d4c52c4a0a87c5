"""The cross-mode verdict: read every mode's ``prof_out/`` of one run and check that they agree.

``python -m common agree [dir ...]`` (default: the four modes' ``prof_out/`` in this checkout).
Inputs are refused, with the reason, when a mode is missing, a run did not complete, or the
folders come from different backends, different runs (nox gives every mode of one invocation
the same ``run_id``) or different workloads (01, 03 and 04 profile the workload; 02 its own
kernel). The lesson checks are the workload's declared expectations (``EXPECT`` in its file,
common/workload.py), "not applicable" where it declares none; op counts come from one real
forward of its model. Each check (common.analyze.checks) names its numbers.
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
from common.workload import BACKEND_DEPENDENT_FAMILIES, Workload, load_workload, tiny_mlp, use_threads


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
# (infer.py: relative to the output's scale) and the scale it used; agree checks that scale against the
# workload's reference and applies the recorded tolerance.
WORKLOAD_MODES = ("01", "03", "04")  # the modes that profile the workload; 02 profiles a kernel of its own


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
    trained = [f"{k} ({folder})" for k, (folder, info) in infos.items() if info.get("train")]
    if trained:
        raise LabError(f"mode {', '.join(trained)} profiled training steps (--train), the others inference forwards",
                       "re-run it without --train to compare the modes; read a training run on its own with "
                       "python -m common report <its prof_out>")
    check_same_workload({k: info for k, (_, info) in infos.items()})
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


# --- the workload ----------------------------------------------------------------------------------
def _short(identity: dict | None) -> str:
    if not identity:
        return "none recorded"
    return f"{identity.get('name')} (sha256 {str(identity.get('sha256'))[:12]})"


def _cell(identity: dict | None) -> str:
    """The workload in a table cell: name and the first 12 hex digits of its sha256."""
    return f"{identity.get('name')} {str(identity.get('sha256'))[:12]}" if isinstance(identity, dict) else "not recorded"


def check_same_workload(infos: dict[str, dict]) -> None:
    """01, 03 and 04 ran one workload (by the sha256 in run_info.json), or a LabError naming them."""
    ids = {k: infos[k].get("workload") for k in WORKLOAD_MODES if k in infos}
    missing = [k for k, w in ids.items() if not (isinstance(w, dict) and w.get("sha256"))]
    if missing:
        raise LabError(f"run_info.json of mode {', '.join(missing)} records no workload, so it cannot be checked "
                       f"that 01, 03 and 04 profiled the same model",
                       "re-run the modes: nox -s cmdline ascendc pyacl pytorch -- 0 [--workload FILE]")
    if len({w["sha256"] for w in ids.values()}) > 1:
        listed = ", ".join(f"{k} {_short(w)}" for k, w in ids.items())
        raise LabError(f"different workloads: {listed}",
                       "run 01, 03 and 04 on one workload in one command: nox -s cmdline ascendc pyacl pytorch -- 0 "
                       "--workload FILE (02 profiles its own kernel and is not compared on it)")


def workload_of(runs: dict[str, ModeRun]) -> Workload:
    """The workload the runs profiled, loaded again from its file (or TinyMLP), unchanged since the run;
    torch set to the thread count the runs recorded, so its reference output is summed as theirs were."""
    identity = runs[WORKLOAD_MODES[-1]].info["workload"]
    path = identity.get("path")
    if path is None:
        workload = tiny_mlp()
    else:
        file = Path(path)
        if not file.is_file():
            raise LabError(f"workload file {path} of this run is gone, so its expected op counts and reference "
                           f"cannot be computed", "restore the file, or re-run the modes on another workload")
        import hashlib

        sha = hashlib.sha256(file.read_bytes()).hexdigest()
        if sha != identity.get("sha256"):
            raise LabError(f"workload file {path} changed since the run (sha256 {str(identity.get('sha256'))[:12]} "
                           f"then, {sha[:12]} now)", "re-run the modes on it: nox -s cmdline ascendc pyacl pytorch "
                           f"-- 0 --workload {path}")
        workload = load_workload(file)
    if workload.sha256 != identity.get("sha256"):
        raise LabError(f"{workload.where} changed since the run (sha256 {str(identity.get('sha256'))[:12]} then, "
                       f"{workload.sha256[:12]} now)", "re-run the modes: nox -s cmdline ascendc pyacl pytorch -- 0")
    threads = {runs[k].info.get("threads") for k in WORKLOAD_MODES if k in runs} - {None}
    if len(threads) == 1:  # the summation order follows the thread count
        use_threads(threads.pop())
    return workload


def workload_line(workload: Workload) -> str:
    where = workload.path or "built in, common/workload.py"
    return f"workload: {workload.name} | sha256 {workload.sha256[:12]} | {where}"


# --- the checks ------------------------------------------------------------------------------------
def verdicts(runs: dict[str, ModeRun], workload: Workload) -> list[Verdict]:
    """The workload's declared expectations across modes, per-forward counts and outputs in every mode."""
    out = lesson_verdicts(runs, workload)
    for k in ("01", "04"):
        run = runs[k]
        out.append(checks.check_forward_counts(run.tasks, run.forwards, workload, f"{k}, {run.forwards} forwards"))
    out.append(graph_count_verdict(runs["03"]))
    out.append(checks.check_kernel_per_launch(runs["02"].tasks, runs["02"].forwards, "add_custom", "elementwise", "02"))
    out.append(checks.check_sum_vs_computing(runs["04"].tasks, runs["04"].steps, "04"))
    out += output_verdicts(runs, workload)
    out += integrity_verdicts(runs)
    return out


def integrity_verdicts(runs: dict[str, ModeRun]) -> list[Verdict]:
    """The integrity checks (common.analyze.checks) of every dataset of every mode, 03's variants included:
    a file edited or cut short after the run fails agree even where the lesson checks still hold."""
    out = []
    for key, run in runs.items():
        datasets = find_datasets(run.folder)
        out += [Verdict(f"{v.name} [{key}]", v.ok, v.detail)
                for v in checks.integrity_verdicts(datasets, run.folder)]
    return out


def lesson_verdicts(runs: dict[str, ModeRun], workload: Workload) -> list[Verdict]:
    """The lesson checks, each one a statement the workload declares in EXPECT; N/A where it declares none.

    top_family: that family has the largest share of forward time in 01, 03 and 04.
    share_agreement_01_04: that family's share agrees between 01 and 04 (same eager ops, two collectors).
    cast_on_03_default: whether ATC's default precision policy puts Casts into 03's default model;
    01 and 04 run the model as written, so they have Casts only where its own forward casts.
    """
    expect = workload.expectations
    out = [checks.check_declared_top_family(runs[k].stats, workload, k) for k in WORKLOAD_MODES]
    family = expect.get("share_agreement_01_04")
    if family is None:
        out.append(checks.not_applicable("share of forward time agrees (01 vs 04)",
                                         workload.not_applicable("share_agreement_01_04")))
    else:
        out.append(checks.check_share_agreement({k: families.forward_shares(runs[k].stats) for k in ("01", "04")},
                                                family, checks.SHARE_AGREEMENT_PP))
    cast = expect.get("cast_on_03_default")
    if cast is None:
        reason = workload.not_applicable("cast_on_03_default")
        out += [checks.not_applicable(f"cast on ATC's default path (03 {PYACL_DEFAULT})", reason),
                checks.not_applicable("cast as in the model (01, 04)", reason)]
    else:
        out.append(checks.check_family_presence(runs["03"].per_forward, "cast", cast, f"03 {PYACL_DEFAULT}"))
        own = workload.expected_op_counts().per_family.get("cast", 0) > 0  # the model's own forward casts
        out += [checks.check_family_presence(runs[k].per_forward, "cast", own, k) for k in ("01", "04")]
    return out


def graph_family_counts(run: ModeRun, variant: str = PYACL_DEFAULT) -> dict[str, int] | None:
    """Per-execute op counts by family of 03's built graph (run_info.json), backend-dependent families left out."""
    graph = run.info.get("results", {}).get(variant, {}).get("graph_op_counts")
    if not isinstance(graph, dict):
        return None
    counts = families.family_counts_of_types(graph)
    return {f: n for f, n in counts.items() if f not in BACKEND_DEPENDENT_FAMILIES}


def graph_count_verdict(run: ModeRun) -> Verdict:
    """03's tasks per execute match its built graph, family by family.

    03 runs an exported and converted graph, not the eager model: the export folds BatchNorm into
    the convolution, unrolls fused attention into MatMuls and a Softmax, the converter fuses
    Conv + ReLU or splits GELU into Erf and element-wise ops. So 03 is counted against what it
    built; how that graph differs from the model's forward is a note (graph_notes).
    """
    where = f"03 {PYACL_DEFAULT}, {run.forwards} forwards, expected from the built graph"
    graph = graph_family_counts(run)
    if graph is None:
        return Verdict(f"op counts per forward ({where})", False,
                       f"run_info.json records no graph_op_counts for the {PYACL_DEFAULT!r} variant")
    return checks.check_counts(run.tasks, run.forwards, graph, where)


def graph_notes(runs: dict[str, ModeRun], workload: Workload) -> list[str]:
    """Where 03's built graph differs from the model's forward (per family), in one line; none if it does not."""
    graph = graph_family_counts(runs["03"])
    if graph is None:
        return []
    model = workload.expected_op_counts().checked
    diffs = [f"{f} {model.get(f, 0)} -> {graph.get(f, 0)}" for f in families.FAMILY_ORDER
             if model.get(f, 0) != graph.get(f, 0)]
    if not diffs:
        return []
    named = [c.get("change") for c in runs["03"].info["results"][PYACL_DEFAULT].get("graph_changes") or []
             if isinstance(c, dict) and c.get("change")]
    return [f"note: 03's built graph ({PYACL_DEFAULT}) differs from {workload.name}'s forward, per family (model -> "
            f"graph): {', '.join(diffs)}" + (f"; 03 names the changes: {'; '.join(named)}" if named else "")
            + "; so 03 is counted against its graph"]


def output_verdicts(runs: dict[str, ModeRun], workload: Workload) -> list[Verdict]:
    out = [checks.check_output_file(runs[k].folder / "output.npy", k, workload) for k in ("01", "04")]
    out.append(checks.check_program_verified(runs["02"].info, "02's host program checks every element (fp16 1 + 1 = 2.0)",
                                             "02"))
    results = runs["03"].info.get("results", {})
    reference = workload.reference_output()
    reference = reference if isinstance(reference, tuple) else (reference,)
    scales = [float(abs(r).max()) if r.size else 0.0 for r in reference]
    for name in runs["03"].variants:
        recorded = results.get(name, {})
        per_output = recorded.get("accuracy_per_output") or [recorded.get("accuracy")]
        if len(per_output) != len(scales):
            out.append(Verdict(f"output matches fp32 reference (03 {name})", False,
                               f"run_info.json records {len(per_output)} output(s), {workload.name} has {len(scales)}"))
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
        return Verdict(f"output matches fp32 reference ({where})", False,
                       f"03 judged it against max|reference| {metrics['scale']:.6g}; the workload's is {scale:.6g}")
    v = checks.check_output(metrics, where, metrics["tol"], metrics.get("cosine_min", 0.999))
    return Verdict(v.name, v.ok, f"{v.detail}; tolerance as 03 recorded it, for max|reference| {scale:.3g}")


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
    workload: str = ""  # what the mode profiled: the workload's name and hash (02: its kernel)


def columns(runs: dict[str, ModeRun], workload: Workload | None = None) -> list[ModeColumn]:
    cols = []
    for k, run in runs.items():
        forward_tasks = [t for t in run.tasks if families.op_family(t.op_type) != "init"]
        init_us = sum(t.duration_us for t in run.tasks if families.op_family(t.op_type) == "init")
        per_fwd_us = sum(t.duration_us for t in forward_tasks) / run.forwards if run.forwards else None
        summary = step_bound.summarize_steps(run.steps)
        label = run.spec.folder + (f" ({PYACL_DEFAULT})" if k == "03" else "")
        cols.append(ModeColumn(
            k, label, run.forwards, per_fwd_us, families.forward_shares(run.stats), init_us, run.per_forward,
            summary.computing_ratio if summary else None, _accuracy(run, workload),
            len(run.tasks) if k == "02" else None,
            "add_custom kernel" if k not in WORKLOAD_MODES else _cell(run.info.get("workload")),
        ))
    return cols


def _accuracy(run: ModeRun, workload: Workload | None = None) -> str:
    if run.spec.key in ("01", "04"):
        from common.analyze.checks import output_metrics

        try:
            m = output_metrics(run.folder / "output.npy", workload)
        except LabError:  # another shape than the reference: the verdict says which
            return "shape differs"
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
        data["sweep"], data["sweep_note"] = sweep[:2]
        data["sweep_x"] = sweep[2] if len(sweep) > 2 else "hidden size"
    return data


SWEEP_FILE = Path("04_pyTorch") / "prof_sweep" / "sweep.json"


def load_sweep(root: Path = REPO_ROOT) -> tuple[dict, str, str] | None:
    """The last ``nox -s sweep`` result as chart series, a note and the x axis: TinyMLP's
    {batch label: [(hidden, computing share)]}, another workload's {name: [(batch, computing share)]}."""
    import json

    path = root / SWEEP_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        x = "batch" if doc.get("x") == "batch" else "hidden"
        name = (doc.get("workload") or {}).get("name", "TinyMLP")
        series: dict[str, list[tuple[int, float]]] = {}
        for point in doc["points"]:
            label = f"batch {point['batch']}" if x == "hidden" else name
            series.setdefault(label, []).append((int(point[x]), float(point["computing_ratio"])))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return (series, f"from {SWEEP_FILE} ({name}, {doc.get('backend')}, {doc.get('start')}); re-run with nox -s sweep",
            f"{x} size")
