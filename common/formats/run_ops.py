"""One run's op times, read from its output folder: what ``python -m common compare`` compares.

A side is one output folder (a mode's ``prof_out/``, a ``PROF_*/`` or ``*_ascend_pt/`` folder) or a
folder of repeated runs (``<mode>/prof_runs/1..N``, each with its run_info.json). Each op's task
time is summed per (where it ran, OP Type, Input Shapes), per profiled forward when run_info.json
says how many there were.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import LabError
from common.formats.cluster import PROFILER_INFO
from common.formats.datasets import MSPROF_NAMES, TORCH_NPU_FILES, find_datasets
from common.formats.records import StepTime, time_by_op_and_dtypes
from common.formats.rundir import RUN_INFO, read_run_info, recorded_count, require_directory

Key = tuple[str, str, str]  # (where, OP Type, Input Shapes)
_LAYOUT_PARTS = ("mindstudio_profiler_output", "ASCEND_PROFILER_OUTPUT")


@dataclass
class RunOps:
    """One run: µs per forward (or per run) for each op key."""

    folder: Path
    info: dict | None
    per: str  # "forward" or "run"
    ops: dict[Key, float]
    missing: list[str] = field(default_factory=list)  # datasets without per-op times, and what they hold instead
    steps: list[StepTime] = field(default_factory=list)  # the step table's rows (torch_npu), none for msprof
    samples: int | None = None  # samples per step (the batch), as run_info.json records it
    dtype_us: dict[tuple[str, str], float] = field(default_factory=dict)  # task µs per (OP Type, Input Data Types)
    rank_steps: dict[int, list[StepTime]] = field(default_factory=dict)  # a multi-rank capture: each rank's steps

    @property
    def workload(self) -> str | None:
        """The name of the workload the run profiled, when its run_info.json says."""
        work = (self.info or {}).get("workload")
        return work.get("name") if isinstance(work, dict) else None


def _where(folder: Path, root: Path) -> str:
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        parts = ()
    keep = [p for p in parts if p not in _LAYOUT_PARTS and not p.startswith("PROF_") and not p.endswith("_ascend_pt")]
    return "/".join(keep)


def _rank_of(folder: Path) -> int | None:
    """The rank a dataset belongs to: its ``*_ascend_pt``'s ``profiler_info_<rank>.json`` (torch_npu's name for a
    rank's export); None for a single-process capture."""
    for place in (folder, folder.parent):
        for info in place.glob("profiler_info_*.json"):
            if found := PROFILER_INFO.match(info.name):
                return int(found[1])
    return None


def load_run(folder: Path) -> RunOps:
    """Sum each op's task time in one output folder, divided by its profiled forwards when known."""
    info = read_run_info(folder)
    forwards = (info or {}).get("forwards") or (info or {}).get("measured_executes")
    ops: dict[Key, float] = {}
    missing, steps, dtype_us, rank_steps = [], [], Counter(), {}
    for ds in find_datasets(folder):
        found = ds.steps
        steps += found
        if (rank := _rank_of(ds.folder)) is not None:
            rank_steps.setdefault(rank, []).extend(found)
        if ds.small:  # what precision the ops ran in (a large capture: not read per task)
            dtype_us.update(time_by_op_and_dtypes(ds.tasks))
        where = _where(ds.folder, folder)
        if not ds.is_db and not ds.has(ds.task_file):
            names = [*MSPROF_NAMES, *(n.rsplit(".", 1)[0] for n in TORCH_NPU_FILES)]
            present = [n for n in dict.fromkeys(names) if ds.has(n)]
            missing.append(
                f"{ds.label(folder)} has no {ds.task_file} file (it has {', '.join(present) or 'nothing else'})"
            )
        for (op_type, shapes), total_us in ds.time_by_op_and_shape().items():  # summed in the engine
            key = (where, op_type, shapes)
            ops[key] = ops.get(key, 0.0) + total_us
    if forwards:
        ops = {k: v / forwards for k, v in ops.items()}
    return RunOps(
        folder,
        info,
        "forward" if forwards else "run",
        ops,
        missing,
        steps,
        recorded_count(info, "samples"),
        dict(dtype_us),
        rank_steps,
    )


def load_side(path: Path | str) -> list[RunOps]:
    """One run, or every run in a folder of repeated runs (sub-folders that carry run_info.json)."""
    path = Path(path)
    require_directory(path, "give a prof_out/ (or a prof_runs/ folder of repeated runs)")
    if not (path / RUN_INFO).is_file():
        repeats = sorted((p for p in path.iterdir() if p.is_dir() and (p / RUN_INFO).is_file()), key=lambda p: p.name)
        if repeats:
            return [load_run(p) for p in repeats]
    return [load_run(path)]


BASELINE_FORMAT = 1  # the layout of a saved baseline (python -m common baseline save); a newer one is refused


def side_to_json(runs: list[RunOps]) -> dict:
    """A side (one run, or repeated runs) as a baseline file keeps it: per run, the op times, the step table, the
    samples per step and the precision facts: what compare needs, without the capture."""
    return {
        "format": BASELINE_FORMAT,
        "runs": [
            {
                "folder": str(r.folder),
                "info": r.info,
                "per": r.per,
                "samples": r.samples,
                "ops": [[*k, v] for k, v in r.ops.items()],
                "missing": r.missing,
                "steps": [dataclasses.asdict(s) for s in r.steps],
                "dtype_us": [[*k, v] for k, v in r.dtype_us.items()],
                "rank_steps": {str(k): [dataclasses.asdict(s) for s in v] for k, v in r.rank_steps.items()},
            }
            for r in runs
        ],
    }


def side_from_json(data: dict, where: str) -> list[RunOps]:
    """:func:`side_to_json`'s value read back; a LabError naming ``where`` when it is not one."""
    try:
        if data.get("format") != BASELINE_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, this lab reads {BASELINE_FORMAT}")
        return [
            RunOps(
                Path(r["folder"]),
                r["info"],
                r["per"],
                {(w, o, sh): v for w, o, sh, v in r["ops"]},
                list(r["missing"]),
                [StepTime(**s) for s in r["steps"]],
                r["samples"],
                {(o, d): v for o, d, v in r["dtype_us"]},
                {int(k): [StepTime(**s) for s in v] for k, v in r.get("rank_steps", {}).items()},
            )
            for r in data["runs"]
        ]
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise LabError(
            f"{where} is not a baseline this lab wrote ({err})",
            "save it again: python -m common baseline save NAME DIR",
        ) from None
