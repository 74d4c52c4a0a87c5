"""The inputs of ``python -m common agree``, read: every mode's ``prof_out/`` and run_info.json, the workload
file the runs profiled, the last sweep. :mod:`common.analyze.cross_mode` checks what is read here.

Inputs are refused, with the reason, when a mode is missing, or the folders come from different
backends, different runs (nox gives every mode of one invocation the same ``run_id``) or
different workloads (01, 03 and 04 profile the workload; 02 its own kernel). A mode that ran but
failed (it stopped, or its own checks did not hold) is set apart with what went wrong.
"""

from __future__ import annotations

from pathlib import Path

from common.analyze import grouping
from common.analyze.cross_mode import (
    MODES,
    PYACL_DEFAULT,
    WORKLOAD_MODES,
    ModeRun,
    ModeSpec,
    check_same_workload,
    mode_problem,
    spec_for,
)
from common.errors import LabError
from common.formats.datasets import find_datasets, forward_windows
from common.formats.export_facts import integrity_facts
from common.formats.outputs import read_output
from common.formats.rundir import REPO_ROOT, read_run_info
from common.workload import WARMUP_FORWARDS, Workload, load_workload, tiny_mlp


def default_dirs(root: Path = REPO_ROOT) -> list[Path]:
    return [root / spec.folder / "prof_out" for spec in MODES]


def _load_info(folder: Path, spec: ModeSpec | None) -> dict:
    if not folder.is_dir():
        what = (
            f"mode {spec.key} ({spec.folder}) missing: {folder} does not exist"
            if spec
            else f"{folder}: no such directory"
        )
        raise LabError(what, f"run it first: nox -s {spec.session}" if spec else "give a mode's prof_out/")
    info = read_run_info(folder)
    if info is None:
        raise LabError(
            f"{folder}: no run_info.json, so its backend and run cannot be checked",
            "agree reads output written by the lab's modes (nox -s cmdline ascendc pyacl pytorch)",
        )
    return info


def modes_not_in_run(dirs: list[Path], run_id: str) -> list[str]:
    """The modes among ``dirs`` whose run_info.json is not of run ``run_id`` (missing, or of an older run)."""
    missing = []
    for folder in dirs:
        spec = next((s for s in MODES if Path(folder).resolve().parent.name == s.folder), None)
        try:
            info = read_run_info(folder) if folder.is_dir() else None
        except LabError:
            info = None
        if not info or info.get("run_id") != run_id:
            missing.append(spec.key if spec else str(folder))
    return missing


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
            raise LabError(
                f"{folder}: no {PYACL_DEFAULT!r} variant in this run",
                "run all variants: bash 03_api_pyAcl/run.sh 0 (or nox -s pyacl)",
            )
        tasks, stats = variants[PYACL_DEFAULT]
        return ModeRun(
            spec,
            folder,
            info,
            info.get("measured_executes"),
            tasks,
            stats,
            variants=variants,
            groups=grouping.tasks_by_execute(tasks, info.get("measured_executes")) or [],
        )
    datasets = find_datasets(folder)
    if spec.key == "04":
        datasets = [ds for ds in datasets if ds.kind == "torch_npu"]
        tasks = [t for ds in datasets for t in ds.tasks if t.step_id is not None]
        steps = [s for ds in datasets for s in ds.steps]
        return ModeRun(
            spec,
            folder,
            info,
            info.get("forwards"),
            tasks,
            [s for ds in datasets for s in ds.op_statistic],
            steps,
            records=grouping.records_by_step(tasks),
            output=read_output(folder / "output.npy"),
            groups=grouping.tasks_by_step(tasks),
        )
    tasks = [t for ds in datasets for t in ds.tasks]
    forwards = info.get("forwards") if spec.key == "01" else info.get("measured_launches")
    windows = forward_windows(datasets)
    stats = [s for ds in datasets for s in ds.op_statistic]
    if spec.key == "01":
        # Forward time is the time inside the measured forwards' ranges, as 04's is its active steps: what the
        # process did outside them (building the model, its input) and the warm-up forwards are not forward time.
        stats = grouping.measured_forward_stats(tasks, windows, WARMUP_FORWARDS) or stats
    return ModeRun(
        spec,
        folder,
        info,
        forwards,
        tasks,
        stats,
        records=grouping.records_in(tasks, windows) if spec.key == "01" else [],
        output=read_output(folder / "output.npy") if spec.key == "01" else None,
        groups=grouping.measured_forward_groups(tasks, windows, WARMUP_FORWARDS)
        if spec.key == "01"
        else grouping.tasks_by_execute(tasks, forwards) or [],  # 02: each measured launch, one task
    )


def _shown(path: Path) -> str:
    """A path as the user will find it: relative to the current folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_runs(dirs: list[Path], allow_mixed_runs: bool = False) -> tuple[dict[str, ModeRun], dict[str, str], list[str]]:
    """The four modes of one run, those that failed apart (mode -> what went wrong), and notes; a LabError
    when a mode is missing or the inputs are stale or mixed (backends, runs, workloads, training)."""
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
            raise LabError(
                f"mode {spec.key} ({spec.folder}) missing from the inputs",
                f"run it (nox -s {spec.session}) and pass its prof_out/ too",
            )
    backends = {k: info.get("backend") for k, (_, info) in infos.items()}
    if len(set(backends.values())) > 1:
        listed = ", ".join(f"{k} {b}" for k, b in backends.items())
        raise LabError(f"mixed backends: {listed}", "run every mode on one machine and backend, in one nox command")
    trained = [f"{k} ({folder})" for k, (folder, info) in infos.items() if info.get("train")]
    if trained:
        raise LabError(
            f"mode {', '.join(trained)} profiled training steps (--train), the others inference forwards",
            "re-run it without --train to compare the modes; read a training run on its own with "
            "python -m common report <its prof_out>",
        )
    notes, failed = [], {}
    run_ids = {k: info.get("run_id") for k, (_, info) in infos.items()}
    newest = max(infos.values(), key=lambda fi: fi[1].get("start") or "")[1]
    stale_runs: set[str] = set()  # the modes set apart because their output is another run's
    if len(set(run_ids.values())) > 1:
        stale = {
            k: f"{k} (run {str(r)[:8]}, {infos[k][1].get('start')})"
            for k, r in run_ids.items()
            if r != newest.get("run_id")
        }
        what = (
            f"stale or mixed inputs: {', '.join(stale.values())} not from the newest run "
            f"{str(newest.get('run_id'))[:8]} ({newest.get('start')})"
        )
        if allow_mixed_runs:
            notes.append(f"note: {what}; compared anyway (--allow-mixed-runs)")
        else:  # e.g. 03's build failed before its run.sh wrote anything: its prof_out/ is an older run's
            notes.append(
                f"note: {what}; re-run all four modes in one command (nox -s cmdline ascendc pyacl "
                "pytorch -- 0), or pass --allow-mixed-runs to compare them anyway"
            )
            failed = {
                k: (
                    f"its output is from another run (run {str(run_ids[k])[:8]}, started "
                    f"{infos[k][1].get('start')}): it did not run in this one, or stopped before writing "
                    "its output"
                )
                for k in stale
            }
            stale_runs = set(stale)
    for k, (_, info) in infos.items():  # stopped before it ran: the reason the session recorded (cli/sessions.py)
        if info.get("failure") and k not in failed:
            failed[k] = mode_problem(info)
    check_same_workload({k: info for k, (_, info) in infos.items() if k not in failed})
    runs = {}
    for k, (folder, info) in sorted(infos.items()):
        if k in failed:
            continue
        problem = mode_problem(info)
        if problem and not info.get("completed"):
            failed[k] = problem  # what it left is partial: nothing of it is compared
            continue
        try:
            runs[k] = load_mode(folder, info)
        except LabError as err:
            failed[k] = f"its output cannot be read: {err}"
            continue
        if problem:
            failed[k] = problem
    for k, reason in failed.items():  # a run that reported on itself: where to read what failed (never an older run's)
        folder, info = infos[k]
        if (folder / "report.md").is_file() and not info.get("failure") and k not in stale_runs:
            failed[k] = f"{reason} — see {_shown(folder / 'report.md')}"
    for k, run in runs.items():  # what the integrity checks read: every dataset of the folder, 03's variants too
        if k not in failed:
            run.integrity = integrity_facts(find_datasets(run.folder), run.folder)
    return runs, failed, notes


def workload_of(runs: dict[str, ModeRun]) -> Workload:
    """The workload the runs profiled, loaded again from its file (or TinyMLP), unchanged since the run (its
    reference output comes from its record when the modes computed it already: common.workload)."""
    present = [k for k in reversed(WORKLOAD_MODES) if k in runs]
    if not present:
        raise LabError(
            "modes 01, 03 and 04 all failed: there is nothing to compare",
            "read each mode's report (<mode>/prof_out/report.md), fix what it says and re-run",
        )
    identity = runs[present[0]].info["workload"]
    path = identity.get("path")
    if path is None:
        workload = tiny_mlp()
    else:
        file = Path(path)
        if not file.is_file():
            raise LabError(
                f"workload file {path} of this run is gone, so its expected op counts and reference cannot be computed",
                "restore the file, or re-run the modes on another workload",
            )
        import hashlib

        sha = hashlib.sha256(file.read_bytes()).hexdigest()
        if sha != identity.get("sha256"):
            raise LabError(
                f"workload file {path} changed since the run (sha256 {str(identity.get('sha256'))[:12]} "
                f"then, {sha[:12]} now)",
                f"re-run the modes on it: nox -s cmdline ascendc pyacl pytorch -- 0 --workload {path}",
            )
        workload = load_workload(file)
    if workload.sha256 != identity.get("sha256"):
        raise LabError(
            f"{workload.where} changed since the run (sha256 {str(identity.get('sha256'))[:12]} then, "
            f"{workload.sha256[:12]} now)",
            "re-run the modes: nox -s cmdline ascendc pyacl pytorch -- 0",
        )
    return workload


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
    return (
        series,
        f"from {SWEEP_FILE} ({name}, {doc.get('backend')}, {doc.get('start')}); re-run with nox -s sweep",
        f"{x} size",
    )
