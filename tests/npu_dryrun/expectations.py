# TEST DOUBLE checks: what a dry run's calls.jsonl must show, per the documented NPU behaviour; tests only.
"""The documented NPU behaviour, checked on a dry run's ``calls.jsonl`` and outputs.

Each check returns a :class:`Result`; the driver prints them all, tests/modes/test_npu_dryrun.py
asserts each one. What "documented" means is read from the tables of docs/npu_reference.md
(the msprof switches, msprof op's ``--aic-metrics`` and ``--launch-skip-before-match``, the ATC
variant options, the pyACL call order); the constants below are used only while that file is
missing, and each result says which it used.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "npu_reference.md"
MEASURED_LAUNCHES_WARMUP = 3  # mode 02: warm-up launches msprof op must skip
# msprof's collection switches (Ascend/msprof docs; the lab's choice of metric set)
MSPROF_SWITCHES = [
    "--ascendcl=on",
    "--runtime-api=on",
    "--task-time=on",
    "--task-memory=on",
    "--ai-core=on",
    "--aic-metrics=PipeUtilization",
    "--aicpu=on",
    "--msproftx=on",
]
# The calls whose order the pyACL check compares (pyACL API reference, "Profiling pyACL API").
PYACL_ORDER = [
    "init",
    "prof.init",
    "mdl.load_from_file",
    "prof.start",
    "mdl.execute",
    "prof.stop",
    "prof.finalize",
    "rt.reset_device",
    "finalize",
]
# Mode 04's torch_npu.profiler schedule (torch_npu table, the profile(…) row).
PROFILER_SCHEDULE = {"wait": 1, "warmup": 3, "active": 5, "repeat": 1}
# Atlas A2 / A3 SoC names (torch_npu NpuVariables.cpp socVersionMap): where AscendC's MetricsProfStart/Stop
# and msprof op's KernelScale exist, and the PipeUtilization layout (aiv_*, sub_block_id) mode 02 reads.
ATLAS_A2_A3 = re.compile(r"Ascend(?:910B[1-4]|910B2C|910B4-1|910_93[0-9]{2})")
# Facts each check relies on; each must appear in docs/npu_reference.md (exact text).
FACTS = {
    "visible": "ASCEND_RT_VISIBLE_DEVICES",
    "pyacl_order": "acl.prof.init",
    "fp32": "must_keep_origin_dtype",
    "kernelscale": "KernelScale",
    "skip": "--launch-skip-before-match",
    "output_dims": "get_output_dims",
    "logs": "ASCEND_PROCESS_LOG_PATH",
    "lessons_alone": "copied alone",
}


def reference_tables(path: Path = REFERENCE) -> dict[str, list[dict[str, str]]]:
    """docs/npu_reference.md as {section title: [row as {column: cell}]} (Markdown pipe tables under ``## `` titles)."""
    if not path.is_file():
        return {}
    tables: dict[str, list[dict[str, str]]] = {}
    title, header = "", None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            title, header = line[3:].strip(), None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = cells
        elif not all(set(c) <= set("-: ") for c in cells):
            tables.setdefault(title, []).append(dict(zip(header, cells)))
    return tables


def _section(tables: dict, prefix: str) -> list[dict[str, str]]:
    return next((rows for title, rows in tables.items() if title.startswith(prefix)), [])


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell or "")


def _row(rows: list[dict[str, str]], what: str) -> dict[str, str]:
    return next((r for r in rows if r.get("what", "").strip("`") == what or r.get("what") == what), {})


def documented() -> dict:
    """The facts the checks compare with: from docs/npu_reference.md when present, else the constants here."""
    tables = reference_tables()
    facts = {
        "source": "docs/npu_reference.md" if tables else "built-in (docs/npu_reference.md missing)",
        "msprof_switches": MSPROF_SWITCHES,
        "op_metrics": ["KernelScale", "PipeUtilization"],
        "op_skip": str(MEASURED_LAUNCHES_WARMUP),
        "fp32": ["--precision_mode=must_keep_origin_dtype"],
        "fp16_io": ["--input_fp16_nodes=x", "--output_type=FP16"],
        "pyacl_order": PYACL_ORDER,
        "executes": [3, 20],
        "schedule": PROFILER_SCHEDULE,
    }
    if not tables:
        return facts
    msprof = _section(tables, "msprof (")
    switches = [r["what"].strip("`") for r in msprof if r.get("what", "").startswith("`--")]
    op = _section(tables, "msprof op")
    metrics = _code(_row(op, "--aic-metrics").get("the lab passes", ""))
    skip = _code(_row(op, "--launch-skip-before-match").get("the lab passes", ""))
    atc = _section(tables, "ATC")
    fp32 = _code(_row(atc, "fp32").get("the lab passes", ""))
    fp16_io = _code(_row(atc, "fp16-io").get("the lab passes", ""))
    pyacl = _section(tables, "pyACL")
    named = [
        m
        for r in pyacl
        for m in re.findall(
            r"acl\.[a-z_]+(?:\.[a-z_]+)?",
            r.get("what", "") + " " + (r.get("the lab passes", "") if r.get("what") == "teardown" else ""),
        )
    ]
    order = [n for n in dict.fromkeys(n.removeprefix("acl.") for n in named) if n in PYACL_ORDER]
    executes = [
        int(m) for r in pyacl if "acl.mdl.execute" in r.get("what", "") for m in re.findall(r"×\s*(\d+)", r["what"])
    ]
    profile = _row(_section(tables, "torch_npu"), "torch_npu.profiler.profile(…)").get("the lab passes", "")
    schedule = re.search(r"schedule\(([^)]*)\)", profile)
    schedule = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", schedule[1])} if schedule else {}
    facts.update(
        msprof_switches=switches or facts["msprof_switches"],
        op_metrics=metrics[0].split(",") if metrics else facts["op_metrics"],
        op_skip=skip[0] if skip else facts["op_skip"],
        fp32=fp32[0].split() if fp32 else facts["fp32"],
        fp16_io=fp16_io[0].split() if fp16_io else facts["fp16_io"],
        pyacl_order=order or PYACL_ORDER,
        executes=executes if len(executes) == 2 else facts["executes"],
        schedule=schedule if set(schedule) >= {"wait", "warmup", "active"} else facts["schedule"],
    )
    return facts


@dataclass
class Result:
    name: str
    ok: bool
    detail: str


def load(out: Path) -> list[dict]:
    path = out / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def by_step(calls: list[dict]) -> dict[str, list[dict]]:
    steps: dict[str, list[dict]] = {}
    current = None
    for c in calls:
        if c["tool"] == "dryrun":
            current = c["args"][0] if c["call"] == "step.begin" else None
            steps.setdefault(c["args"][0], [])
        elif current:
            steps[current].append(c)
    return steps


def summary(out: Path) -> dict:
    path = out / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {"steps": []}


def soc_of(out: Path) -> str:
    """The SoC the dry run's steps must use ($SOC_VERSION, else "Ascend" + the stand-in's chip)."""
    return summary(out).get("soc", "Ascend910B3")


def step_result(out: Path, name: str) -> dict:
    return next((s for s in summary(out)["steps"] if s["name"] == name), {})


def ok_calls(calls: list[dict], tool: str, call: str) -> list[dict]:
    return [c for c in calls if c["tool"] == tool and c["call"] == call and c.get("rc", 0) == 0]


# ----- the checks -------------------------------------------------------------------------------------
def detection(out: Path, device: int) -> Result:
    step = step_result(out, "detect")
    try:
        found = json.loads(step.get("stdout_tail", "").strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = (step.get("error_lines") or step.get("stderr_tail", "").strip().splitlines() or ["no output"])[-1]
        return Result("lab detects the npu backend", False, f"probe exit {step.get('rc')}: {last}")
    ok = found["name"] == "npu" and found["devices"] == list(range(8)) and found["soc"] == soc_of(out)
    return Result(
        "lab detects the npu backend",
        ok,
        f"{found['name']}, devices {found['devices']}, soc {found['soc']}, modules {found['python_modules']}",
    )


def no_visible_devices(out: Path, device: int) -> Result:
    calls = [c for c in load(out) if c["tool"] != "dryrun"]
    bad = sorted({f"{c['tool']} {c['call']}" for c in calls if "ASCEND_RT_VISIBLE_DEVICES" in c.get("env", {})})
    tools = [c for c in calls if c["tool"] in ("msprof", "msprof op")]
    return Result(
        "no ASCEND_RT_VISIBLE_DEVICES (msprof, msprof op, programs)",
        bool(tools) and not bad,
        f"{len(tools)} msprof calls; set for: {', '.join(bad) or 'none'}",
    )


# Where each step's programs must write CANN's logs: <the lab's copy>/<its output folder>/logs (runlogs.py).
LOG_FOLDERS = {
    "01": "01_cmdline/prof_out",
    "02": "02_api_AscendC/prof_out",
    "03.msprof": "03_api_pyAcl/prof_out",
    "03.acl_prof": "03_api_pyAcl/prof_out",
    "04": "04_pyTorch/prof_out",
    "04.ddp": "04_pyTorch/prof_out_ddp",
    "precision": "precision_out",
}
PROGRAM_TOOLS = {"msprof", "msprof op", "acl", "ascendcl", "torch_npu"}  # npu-smi is the lab's own probe
LOG_LEVELS = {"0", "1", "2", "3", "4"}  # CANN's environment-variable reference: DEBUG, INFO, WARNING, ERROR, NULL


def runtime_logs(out: Path, device: int) -> Result:
    """Every NPU program of a mode runs with ASCEND_PROCESS_LOG_PATH=<its output folder>/logs and a valid level."""
    lab, steps, bad, seen = Path(summary(out).get("lab", out / "lab")), by_step(load(out)), [], 0
    for step, folder in LOG_FOLDERS.items():
        want = str(lab / folder / "logs")
        for c in steps.get(step, []):
            if c["tool"] not in PROGRAM_TOOLS:
                continue
            seen += 1
            env = c.get("env", {})
            if env.get("ASCEND_PROCESS_LOG_PATH") != want or env.get("ASCEND_GLOBAL_LOG_LEVEL") not in LOG_LEVELS:
                bad.append(
                    f"{step} {c['tool']} {c['call']}: {env.get('ASCEND_PROCESS_LOG_PATH')!r} "
                    f"level {env.get('ASCEND_GLOBAL_LOG_LEVEL')!r}"
                )
    return Result(
        "every NPU program logs into its output folder (ASCEND_PROCESS_LOG_PATH, ASCEND_GLOBAL_LOG_LEVEL)",
        seen > 0 and not bad,
        f"{seen} program calls; wrong: {'; '.join(sorted(set(bad))[:3]) or 'none'}",
    )


DEVICE_CALLS = {
    ("acl", "rt.set_device"),
    ("ascendcl", "aclrtSetDevice"),
    ("torch_npu", "npu.set_device"),
    ("torch_npu", "tensor.to"),
}


def devices_in(calls: list[dict], kinds=DEVICE_CALLS) -> list[int]:
    return sorted({int(c["args"][0]) for c in calls if (c["tool"], c["call"]) in kinds and c.get("rc", 0) == 0})


def program_selects(out: Path, device: int, step: str, kinds: set, want: list[int] | None = None) -> Result:
    calls = by_step(load(out)).get(step, [])
    chosen = devices_in(calls, kinds)
    refused = [
        f"{c['call']}({c['args'][0]}) rc {c.get('rc')}"
        for c in calls
        if (c["tool"], c["call"]) in DEVICE_CALLS and c.get("rc", 0) != 0
    ]
    want = want or [device]
    return Result(
        f"{step}: the program selects logical device {','.join(map(str, want))} itself",
        chosen == want,
        f"selected {chosen or 'none'} via {sorted({c for _, c in kinds})}; refused: {refused or 'none'}",
    )


def pyacl_order(out: Path, device: int, step: str = "03.acl_prof") -> Result:
    calls = [c for c in by_step(load(out)).get(step, []) if c["tool"] == "acl"]
    refused = [f"{c['call']}: {c.get('refused')}" for c in calls if c.get("rc", 0) != 0]

    def at(call: str, last: bool = False) -> int | None:
        idx = [i for i, c in enumerate(calls) if c["call"] == call and c.get("rc", 0) == 0]
        return (idx[-1] if last else idx[0]) if idx else None

    facts = documented()
    order = facts["pyacl_order"]
    seen = [at(c) for c in order]
    start, stop = at("prof.start"), at("prof.stop")
    executes = [i for i, c in enumerate(calls) if c["call"] == "mdl.execute"]
    measured = [i for i in executes if start is not None and stop is not None and start < i < stop]
    warmup, profiled = facts["executes"]
    ok = (
        None not in seen
        and seen == sorted(seen)
        and not refused
        and len(measured) == profiled
        and len(executes) == warmup + profiled
        and set(PYACL_ORDER) <= set(order)
    )
    detail = ", ".join(f"{c}@{i}" for c, i in zip(order, seen))
    return Result(
        "03 --acl-prof: acl.init < prof.init < load < prof.start < execute < prof.stop < prof.finalize "
        "< rt.reset_device < acl.finalize",
        ok,
        f"{detail} (order from {facts['source']}); {len(measured)} executes profiled "
        f"of {len(executes)} (want {profiled} of {warmup + profiled}); refused: {refused or 'none'}",
    )


def pyacl_config_device(out: Path, device: int) -> Result:
    calls = [c for c in by_step(load(out)).get("03.acl_prof", []) if c["call"] == "prof.create_config"]
    lists = [c["args"][0] for c in calls if c.get("handle")]
    return Result(
        f"03 --acl-prof: acl.prof.create_config([{device}], ...)", lists == [[device]], f"device lists {lists}"
    )


def msprof_argv(out: Path, device: int) -> Result:
    facts = documented()
    switches = facts["msprof_switches"]
    calls = [c for c in load(out) if c["tool"] == "msprof" and c["call"] == "collect"]
    bad = []
    for c in calls:
        options = [a for a in c["args"] if a.startswith("--")][: len(switches) + 1]
        if not options or not options[0].startswith("--output=") or options[1:] != switches:
            bad.append(" ".join(c["args"][:10]))
    refused = [c["refused"] for c in load(out) if c["tool"] == "msprof" and c.get("refused")]
    return Result(
        "msprof argv: --output, the documented switches, then the program",
        bool(calls) and not bad and not refused,
        f"{len(calls)} collections; switches from {facts['source']}: {' '.join(switches)}; "
        f"wrong: {bad or 'none'}; refused: {refused or 'none'}",
    )


def msprof_op(out: Path, device: int) -> Result:
    soc = soc_of(out)
    builds = [c for c in by_step(load(out)).get("02.build", []) if c["tool"] == "cmake" and c["call"] == "build"]
    region = builds[-1].get("kernel_calls") if builds else None
    if not ATLAS_A2_A3.fullmatch(soc):
        return not_a2_a3(out, soc, region)
    calls = [c for c in by_step(load(out)).get("02", []) if c["tool"] == "msprof op"]
    collect = [c for c in calls if c["call"] == "collect"]
    done = [c for c in calls if c["call"] == "collect.done"]
    args = collect[0]["args"] if collect else []
    metrics = next((a.split("=", 1)[1].split(",") for a in args if a.startswith("--aic-metrics=")), [])
    skip = next((a.split("=", 1)[1] for a in args if a.startswith("--launch-skip-before-match=")), None)
    facts = documented()
    ok = (
        metrics == facts["op_metrics"]
        and "KernelScale" in metrics
        and skip == facts["op_skip"]
        and "--kernel-name=add_custom" in args
        and bool(done)
        and done[0].get("launches", 0) >= 1
        and collect[0].get("rc", 0) == 0
        and region == ["MetricsProfStart", "MetricsProfStop"]
    )
    return Result(
        f"02 on {soc}: kernel built with MetricsProfStart/Stop; msprof op --aic-metrics="
        f"{','.join(facts['op_metrics'])} --launch-skip-before-match={facts['op_skip']} ({facts['source']})",
        ok,
        f"kernel calls {region}; argv {' '.join(args[:6]) or 'none'}; "
        f"collected {done[0].get('launches') if done else 'nothing'}; "
        f"refused: {(collect[0].get('refused') if collect else None) or 'none'}",
    )


def not_a2_a3(out: Path, soc: str, region: list[str] | None) -> Result:
    """Outside Atlas A2/A3: no MetricsProf region in the kernel, no msprof op (so no KernelScale), and
    mode 02's run stops with one Error: line naming the A2/A3 layout it reads."""
    step = step_result(out, "02")
    calls = [c for c in by_step(load(out)).get("02", []) if c["tool"] in ("msprof", "msprof op")]
    errors = step.get("error_lines", [])
    ok = (
        region == []
        and not calls
        and step.get("rc") not in (0, None)
        and not step.get("traceback")
        and len(errors) == 1
        and "Atlas A2/A3" in errors[0]
    )
    return Result(
        f"02 on {soc} (not Atlas A2/A3): kernel without MetricsProfStart/Stop, no msprof op, one Error: line",
        ok,
        f"kernel calls {region}; msprof calls {len(calls)}; exit {step.get('rc')}; "
        f"{errors or 'no Error: line'}{'; TRACEBACK' if step.get('traceback') else ''}",
    )


PYASC_KERNEL = "add_kernel"  # add_pyasc.py's @asc.jit function
PYASC_SIMULATOR_SOC = "Ascend910B1"  # driver.SIMULATOR_SOC


def _tool_options(args: list[str]) -> list[str]:
    """The leading ``--`` options of a recorded argv (a stand-in records it without ``op`` / ``op simulator``)."""
    return args[: next((i for i, a in enumerate(args) if not a.startswith("--")), len(args))]


def _pyasc_program(args: list[str], tail: list[str]) -> bool:
    """``<python> <...>/02_api_AscendC/src/add_pyasc.py <tail>`` right after the tool's options."""
    rest = args[len(_tool_options(args)) :]
    return (
        len(rest) == 2 + len(tail)
        and "python" in Path(rest[0]).name
        and rest[1].endswith("02_api_AscendC/src/add_pyasc.py")
        and rest[2:] == tail
    )


def pyasc_npu(out: Path, device: int) -> Result:
    """02 --kernel pyasc: msprof op --output --kernel-name=add_kernel --aic-metrics=KernelScale,PipeUtilization
    --launch-count=1, then the lesson with -r NPU --device <dev>; one launch on <dev> collected, the report ran."""
    soc = soc_of(out)
    step = step_result(out, "02.pyasc")
    calls = by_step(load(out)).get("02.pyasc", [])
    collect = [c for c in calls if c["tool"] == "msprof op" and c["call"] == "collect"]
    if not ATLAS_A2_A3.fullmatch(soc):
        errors = step.get("error_lines", [])
        return Result(
            f"02 --kernel pyasc on {soc} (not Atlas A2/A3): no msprof op, one Error: line",
            not collect and step.get("rc") not in (0, None) and len(errors) == 1 and "Atlas A2/A3" in errors[0],
            f"{len(collect)} msprof op calls; {errors or 'no Error: line'}",
        )
    args = collect[0]["args"] if collect else []
    options = _tool_options(args)
    want = ["--kernel-name=add_kernel", f"--aic-metrics={','.join(documented()['op_metrics'])}", "--launch-count=1"]
    done = [c for c in calls if c["tool"] == "msprof op" and c["call"] == "collect.done"]
    launches = [c for c in calls if c["tool"] == "pyasc" and c["call"] == "launch"]
    ok = (
        len(collect) == 1
        and options[:1]
        and options[0].startswith("--output=")
        and options[1:] == want
        and _pyasc_program(args, ["-r", "NPU", "--device", str(device)])
        and bool(done)
        and done[0].get("launches") == 1
        and done[0].get("region_honoured")
        and [c["args"][2] for c in launches] == [device]
        and step.get("rc") == 0
        and not step.get("traceback")
    )
    return Result(
        "02 --kernel pyasc: msprof op --output " + " ".join(want) + " <python> add_pyasc.py -r NPU "
        "--device <dev>, one launch collected on <dev>",
        bool(ok),
        f"argv {' '.join(args) or 'none'}; launches on {[c['args'][2] for c in launches]}; "
        f"collected {done[0].get('launches') if done else 'nothing'}; exit {step.get('rc')}",
    )


def pyasc_simulator(out: Path, device: int) -> Result:
    """02 --kernel pyasc --simulator: msprof op simulator --soc-version=<soc> --output --kernel-name=add_kernel
    --launch-count=1, then the lesson with -r Model -v <soc>; per-core folders written and read."""
    soc = PYASC_SIMULATOR_SOC
    step = step_result(out, "02.pyasc_sim")
    calls = by_step(load(out)).get("02.pyasc_sim", [])
    collect = [c for c in calls if c["tool"] == "msprof op simulator" and c["call"] == "collect"]
    args = collect[0]["args"] if collect else []
    options = _tool_options(args)
    want_head = [f"--soc-version={soc}"]
    want_tail = ["--kernel-name=add_kernel", "--launch-count=1"]
    done = [c for c in calls if c["tool"] == "msprof op simulator" and c["call"] == "collect.done"]
    cores = sorted((out / "results" / "02.pyasc_sim").glob("OPPROF_*/simulator/core*.veccore*"))
    ok = (
        len(collect) == 1
        and args[:1] == want_head
        and len(options) == 4
        and options[1].startswith("--output=")
        and options[2:] == want_tail
        and _pyasc_program(args, ["-r", "Model", "-v", soc])
        and bool(done)
        and done[0].get("launches") == 1
        and done[0].get("backend") == "Model"
        and bool(cores)
        and step.get("rc") == 0
        and not step.get("traceback")
    )
    return Result(
        f"02 --kernel pyasc --simulator {soc}: msprof op simulator --soc-version={soc} --output "
        + " ".join(want_tail)
        + f" <python> add_pyasc.py -r Model -v {soc}; per-core folders read",
        bool(ok),
        f"argv {' '.join(args) or 'none'}; collected {done[0].get('launches') if done else 'nothing'}; "
        f"{len(cores)} core folders; exit {step.get('rc')}",
    )


def atc_variants(out: Path, device: int) -> Result:
    calls = [c for c in by_step(load(out)).get("03.build", []) if c["tool"] == "atc"]
    converts = {
        next((Path(a.split("=", 1)[1]).name for a in c["args"] if a.startswith("--output=")), "?"): c["args"]
        for c in calls
        if c["call"] == "convert"
    }
    fp32 = converts.get("tiny_mlp_fp32", [])
    fp16io = converts.get("tiny_mlp_fp16-io", [])
    default = converts.get("tiny_mlp_default", [])
    facts = documented()
    keep = set(facts["fp32"]) <= set(fp32) and any(
        a in fp32 for a in ("--precision_mode=must_keep_origin_dtype", "--precision_mode_v2=origin")
    )
    socs = {a for args in converts.values() for a in args if a.startswith("--soc_version=")}
    ok = (
        keep
        and "--precision_mode=force_fp32" not in fp32
        and not any(a.startswith("--precision_mode") for a in default)
        and set(facts["fp16_io"]) <= set(fp16io)
        and socs == {f"--soc_version={soc_of(out)}"}
        and len(ok_calls(calls, "atc", "mode1")) == 3
        and all(c.get("rc", 0) == 0 for c in calls)
    )
    precision = [a for a in fp32 if a.startswith("--precision_mode")]
    return Result(
        "03 atc: fp32 keeps fp32 (--precision_mode=must_keep_origin_dtype), fp16-io, default; --mode=1 each",
        ok,
        f"variants {sorted(converts)}; fp32 {precision or 'no precision option'} (want {facts['fp32']} "
        f"from {facts['source']}); socs {sorted(socs)}; "
        f"refused: {[c.get('refused') for c in calls if c.get('rc', 0)] or 'none'}",
    )


def precision_dump(out: Path, device: int, name: str = "precision") -> Result:
    """precision on the NPU: per .om ATC built, one pyACL process calls acl.init with the documented dump block
    (dump_path an existing folder inside precision_out/, the .om's name as model_name, output tensors), loads that
    .om, executes it once, and msaccucmp.py convert -t npy turns that execute's folder into .npy files; the report
    compares every variant's dumped ops. ``precision.other_names``: the same with the dump's folder named by the
    model's internal name and converted files named with a shape suffix (the lab walks the dump's tree)."""
    step = step_result(out, name)
    calls = by_step(load(out)).get(name, [])
    folder = Path(summary(out).get("lab", out / "lab")) / "precision_out"
    built = {
        Path(a.split("=", 1)[1]).name
        for c in ok_calls(by_step(load(out)).get("03.build", []), "atc", "convert")
        for a in c["args"]
        if a.startswith("--output=")
    }
    converts = {c["args"][c["args"].index("-d") + 1]: c["args"] for c in ok_calls(calls, "msaccucmp", "convert")}
    seen, bad = set(), []
    for init in (c for c in ok_calls(calls, "acl", "init") if c.get("dump")):
        mine = [c for c in calls if c.get("pid") == init["pid"] and c["tool"] == "acl"]
        dump, loads = init["dump"], [Path(c["args"][0]).stem for c in ok_calls(mine, "acl", "mdl.load_from_file")]
        executes = ok_calls(mine, "acl", "mdl.execute")
        names = [i.get("model_name") for i in dump.get("dump_list", [])]
        where = executes[0].get("dumped") if len(executes) == 1 else None
        convert = converts.get(where or "")
        problem = (
            (not Path(dump.get("dump_path", "")).is_relative_to(folder) and "dump_path outside precision_out")
            or (names != loads and f"model_name {names} for loaded {loads}")
            or ((dump.get("dump_mode"), dump.get("dump_data")) != ("output", "tensor") and "not output tensors")
            or (len(executes) != 1 and f"{len(executes)} executes")
            or (convert is None and "its dump was not converted")
            or (convert[-2:] != ["-t", "npy"] and "not converted to npy")
            or (
                name != "precision"
                and Path(where).parts[-3] in loads
                and "the pose did not apply: the dump folder is named by the .om"
            )
        )
        if problem:
            bad.append(f"{loads}: {problem}")
        seen.update(loads)
    report = out / step["kept"] / "report.txt" if step.get("kept") else None
    text = report.read_text() if report and report.is_file() else ""
    ok = (
        bool(built)
        and seen == built
        and not bad
        and step.get("rc") in (0, 1)
        and not step.get("traceback")
        and text.count("the ACL dump of") == len(built)
    )
    return Result(
        f"{name}: each .om dumped once via acl.init's dump block, converted by msaccucmp.py, compared",
        ok,
        f"exit {step.get('rc')}; dumped {sorted(seen)} of built {sorted(built)}; {len(converts)} conversions; "
        f"wrong: {'; '.join(bad) or 'none'}; report {'has' if text else 'lacks'} the dump rows"
        f"{'; ' + step['error_lines'][0] if step.get('error_lines') else ''}",
    )


def output_dims(out: Path, device: int) -> Result:
    calls = [c for s in ("03.msprof", "03.acl_prof") for c in by_step(load(out)).get(s, []) if c["tool"] == "acl"]
    dims = [c for c in calls if c["call"] == "mdl.get_output_dims"]
    return Result(
        "03: output dims read from the model description (acl.mdl.get_output_dims)", bool(dims), f"{len(dims)} calls"
    )


def no_refusals(out: Path, device: int) -> Result:
    calls = [c for c in load(out) if c["tool"] != "dryrun"]
    bad = [f"{c['tool']} {c['call']}: {c.get('refused')}" for c in calls if c.get("refused")]
    return Result(
        "no stand-in refused a call (flags, order, device ids)",
        bool(calls) and not bad,
        f"{len(calls)} calls; refused: {'; '.join(sorted(set(bad))) or 'none'}",
    )


REPORTING_STEPS = ("01", "02", "03.msprof", "03.acl_prof", "04")


def reports_ran(out: Path, device: int) -> Result:
    parts, ok = [], True
    steps = REPORTING_STEPS if ATLAS_A2_A3.fullmatch(soc_of(out)) else tuple(n for n in REPORTING_STEPS if n != "02")
    for name in steps:  # outside Atlas A2/A3, 02 stops before it runs (checked by msprof_op)
        step = step_result(out, name)
        kept = out / step["kept"] if step.get("kept") else None
        info = json.loads((kept / "run_info.json").read_text()) if kept and (kept / "run_info.json").is_file() else {}
        report = bool(kept and (kept / "report.md").is_file()) or name.startswith("03")
        good = (
            step.get("rc") in (0, 1)
            and not step.get("traceback")
            and info.get("backend") in ("npu",)
            and info.get("device") == device
            and info.get("end") is not None
            and report
        )
        ok &= good
        parts.append(
            f"{name}: exit {step.get('rc')}, finished {info.get('end') is not None}, "
            f"{'report' if report else 'no report'}{', TRACEBACK' if step.get('traceback') else ''}"
            f"{' ' + step['error_lines'][0] if step.get('error_lines') else ''}"
        )
    return Result(
        "every mode ran to its report on the replayed outputs (exit 0/1, run_info finished, npu, device)",
        ok,
        "; ".join(parts),
    )


def device_in_outputs(out: Path, device: int) -> Result:
    found: set[str] = set()
    results = [out / "results" / name for name in REPORTING_STEPS]  # not 04.ddp: its ranks use two devices

    def paths(pattern: str) -> list[Path]:
        return [p for r in results for p in r.glob(pattern)]

    for path in paths("**/op_summary_*.csv"):
        with path.open(newline="") as f:
            found |= {row.get("Device_id", "") for row in csv.DictReader(f)}
    for path in paths("**/PROF_*/device_*"):
        found.add(path.name.split("_", 1)[1])
    for path in paths("**/OPPROF_*/OpBasicInfo.csv"):
        with path.open(newline="") as f:
            found |= {row.get("Device Id", "") for row in csv.DictReader(f)}
    return Result(
        f"device {device} in every PROF_*/device_*, op_summary Device_id and OpBasicInfo Device Id",
        found == {str(device)},
        f"found {sorted(found) or 'none'}",
    )


def ddp(out: Path, device: int) -> Result:
    step = step_result(out, "04.ddp")
    if not step:
        return Result("04 DDP: ranks select their devices, HCCL group, report", False, "step not run")
    calls = by_step(load(out)).get("04.ddp", [])
    want = sorted({device, (device + 1) % 8})
    chosen = devices_in(calls, {("torch_npu", "npu.set_device")})
    groups = ok_calls(calls, "torch_npu", "hccl.create_group")
    ok = step.get("rc") in (0, 1) and not step.get("traceback") and chosen == want and len(groups) == len(want)
    return Result(
        "04 DDP: ranks select their devices, HCCL group, report",
        ok,
        f"exit {step.get('rc')}; set_device {chosen} (want {want}); {len(groups)} hccl groups"
        f"{'; ' + step['error_lines'][0] if step.get('error_lines') else ''}",
    )


def dynamic_04(out: Path, device: int, name: str = "04.dynamic") -> Result:
    """04.dynamic (the stand-in posing as torch_npu 7.2.0) and 04.dynamic_pta71 (as 7.1.0): the job is started
    with PROF_CONFIG_PATH (torch_npu's own init, no dynamic_profile call and no profiler in the lab's code), the
    edited profiler_config.json is seen (its whole-second mtime later than init's) and its start_step, a step the
    job has not reached, starts one collection of warmup + active steps into prof_dir at that step; the lesson
    reports on that capture."""
    step = step_result(out, name)
    calls = by_step(load(out)).get(name, [])
    lab = Path(summary(out).get("lab", out / "lab")) / "04_pyTorch" / "prof_out_dynamic"
    inits = ok_calls(calls, "torch_npu", "dynamic_profile.init")
    collects = ok_calls(calls, "torch_npu", "dynamic_profile.collect")
    unseen = [c for c in calls if c["call"] in ("dynamic_profile.unseen", "dynamic_profile.ignored")]
    cfg = collects[0]["args"][0] if collects else {}
    first = next((i for i, c in enumerate(calls) if c["call"] == "dynamic_profile.collect"), len(calls))
    early = [c["call"] for c in calls[:first] if c["call"].startswith("profiler.")]  # a profiler the lab made itself
    steps = ok_calls(calls, "torch_npu", "profiler.step")
    exports = ok_calls(calls, "torch_npu", "profiler.export")
    kept = out / step["kept"] if step.get("kept") else None
    start = cfg.get("start_step")
    ok = (
        len(inits) == 1
        and inits[0].get("via") == "PROF_CONFIG_PATH"
        and inits[0]["args"] == [str(lab / "profiler_config_path")]
        and len(collects) == 1
        and not unseen
        and isinstance(start, int)
        and start > 0
        and collects[0].get("at_step") == start
        and cfg.get("prof_dir") == str(lab)
        and not early
        and len(steps) == cfg.get("warmup", 0) + cfg.get("active", 0)
        and len(exports) == 1
        and exports[0]["args"][0].startswith(str(lab))
        and devices_in(calls) == [device]
        and step.get("rc") in (0, 1)
        and not step.get("traceback")
        and bool(kept and (kept / "report.md").is_file())
    )
    release = inits[0].get("release") if inits else None
    return Result(
        f"{name} (torch_npu {release}): PROF_CONFIG_PATH at start-up, profiler_config.json edited mid-run, "
        "one capture at start_step, report",
        ok,
        f"exit {step.get('rc')}; init {[(c.get('via'), c['args']) for c in inits]}; "
        f"collections {len(collects)} (start_step {start} at step {collects[0].get('at_step') if collects else None}, "
        f"warmup {cfg.get('warmup')}, active {cfg.get('active')}); edits unseen or ignored "
        f"{[(c['call'], c['args']) for c in unseen] or 'none'}; {len(steps)} profiler steps; "
        f"exports {len(exports)}; profiler calls before the edit {early or 'none'}; devices {devices_in(calls)}"
        f"{'; ' + step['error_lines'][0] if step.get('error_lines') else ''}",
    )


LESSONS_ALONE = ("alone.01", "alone.02", "alone.03", "alone.04")  # driver.lessons: each lesson copied alone


def _failed(conditions: list[tuple[bool, str]]) -> list[str]:
    return [problem for bad, problem in conditions if bad]


def ran_alone(out: Path, step: str) -> list[str]:
    """What was wrong with how ``step``'s lesson ran alone: its exit, a folder holding more than the lesson
    (another .py file, a ``common``), a PYTHONPATH entry holding the lab, or ``common`` importable there."""
    result = step_result(out, step)
    if not result:
        return ["not run"]
    name, folder = Path(result["lesson"]).name, Path(result["folder"])
    beside = sorted(p.name for p in folder.iterdir() if p.name != name and (p.suffix == ".py" or p.name == "common"))
    lab = [p for p in result["pythonpath"] if p and (Path(p) / "common").exists()]
    error = f" {result['error_lines'][0]}" if result["error_lines"] else ""
    return _failed(
        [
            (
                result["rc"] != 0 or result["traceback"],
                f"exit {result['rc']}{' TRACEBACK' * result['traceback']}{error}",
            ),
            (result["copied"] != [name] or bool(beside), f"the folder held {result['copied']}, then also {beside}"),
            (result["argv"][1] != name, f"ran {result['argv'][1]}, not the copy"),
            (bool(lab), f"PYTHONPATH holds the lab: {lab}"),
            (result["common_found"] != "None", f"import common finds {result['common_found']}"),
        ]
    )


def taught_calls(out: Path, device: int, step: str) -> tuple[list[str], str]:
    """(problems, what was seen): the device selection and the profiler calls ``step``'s lesson teaches."""
    calls = by_step(load(out)).get(step, [])
    folder = Path(step_result(out, step)["folder"])
    prof_out = (folder / "prof_out").resolve()  # --out prof_out: relative to the folder the lesson ran in

    def in_prof_out(path: str) -> bool:
        return (folder / path).resolve().is_relative_to(prof_out)

    # 01 and 04: torch.npu.set_device(<dev>), and every tensor moved to that device
    chosen, used = devices_in(calls, {("torch_npu", "npu.set_device")}), devices_in(calls)
    torch_device = (chosen != [device] or used != [device], f"set_device {chosen}, devices used {used}")
    if step == "alone.01":  # an mstx range around each forward
        starts, ends = ok_calls(calls, "torch_npu", "mstx.range_start"), ok_calls(calls, "torch_npu", "mstx.range_end")
        return _failed(
            [
                torch_device,
                (not starts or len(starts) != len(ends), f"{len(starts)} mstx ranges started, {len(ends)} ended"),
            ]
        ), f"set_device {chosen}, {len(starts)} mstx ranges"
    if step == "alone.02":  # config.set_platform(Backend.NPU, device_id=<dev>); the kernel launched there
        platforms = [c["args"] for c in ok_calls(calls, "pyasc", "set_platform")]
        launches = [c["args"][2] for c in ok_calls(calls, "pyasc", "launch")]
        return _failed(
            [
                (platforms != [["NPU", None, device]], f"set_platform {platforms}"),
                (not launches or set(launches) != {device}, f"launches on {launches}"),
            ]
        ), f"set_platform {platforms}, {len(launches)} launches on {sorted(set(launches))}"
    if step == "alone.03":  # acl.rt.set_device(<dev>); the acl.prof chain in CANN's order, writing into --out
        chosen = devices_in(calls, {("acl", "rt.set_device")})
        order = pyacl_order(out, device, step)
        configs = [c["args"][0] for c in calls if c["call"] == "prof.create_config" and c.get("handle")]
        inits = [c["args"][0] for c in ok_calls(calls, "acl", "prof.init")]
        written = sorted(p.name for p in prof_out.glob("PROF_*"))
        return _failed(
            [
                (chosen != [device], f"set_device {chosen}"),
                (not order.ok, f"acl chain: {order.detail}"),
                (configs != [[device]], f"create_config device lists {configs}"),
                (len(inits) != 1 or not in_prof_out(inits[0]) or not written, f"prof.init {inits}, wrote {written}"),
            ]
        ), f"set_device {chosen}, acl.prof chain in order: {order.ok}, create_config {configs}, {written}"
    # alone.04: torch_npu.profiler.profile with the schedule, prof.step() per step, one export from <dev>
    want = documented()["schedule"]
    schedules = [
        {k: v for k, v in (c["args"][0].get("schedule") or {}).items() if k in want}
        for c in ok_calls(calls, "torch_npu", "profiler.profile")
    ]
    steps = ok_calls(calls, "torch_npu", "profiler.step")
    exports = [(c["args"][0], c.get("device")) for c in ok_calls(calls, "torch_npu", "profiler.export")]
    return _failed(
        [
            torch_device,
            (schedules != [want], f"profile schedules {schedules} (want {want})"),
            (len(steps) != want["wait"] + want["warmup"] + want["active"], f"{len(steps)} prof.step() calls"),
            (len(exports) != 1 or exports[0][1] != device or not in_prof_out(exports[0][0]), f"exports {exports}"),
        ]
    ), f"set_device {chosen}, schedule {schedules}, {len(steps)} steps, {len(exports)} export"


def lessons_alone(out: Path, device: int) -> Result:
    """Each Python lesson, copied alone into a folder of its own and run with no lab on its path, exits 0,
    selects device <dev> itself and makes the profiler calls it teaches."""
    parts, ok = [], True
    for step in LESSONS_ALONE:
        problems = ran_alone(out, step)
        taught, seen = taught_calls(out, device, step) if problems != ["not run"] else ([], "")
        ok &= not problems and not taught
        parts.append(f"{step}: {'; '.join(problems + taught) or 'ok'}{f' ({seen})' if seen else ''}")
    return Result(
        f"the lessons copied alone (nothing of the lab beside them or on PYTHONPATH) exit 0 on device "
        f"{device}: 01 mstx ranges, 02 pyasc launch, 03 acl.prof chain, 04 torch_npu.profiler with its "
        "schedule",
        ok,
        " | ".join(parts),
    )


# The 04 lesson's NPU-only fixes (--npu-tuning, every one): the settings its sources give (docs/make_it_faster.md)
TUNING_ENV = {"TASK_QUEUE_ENABLE": "2", "CPU_AFFINITY_CONF": "2"}  # read by torch_npu as it starts: set before import
TUNING_CALLS = {"npu.config.allow_internal_format": [False], "npu.matmul.allow_hf32": [True]}


def npu_tuning(out: Path, device: int, step: str = "alone.04.tuning") -> Result:
    """The 04 lesson copied alone with every NPU-only fix: the two variables set before torch_npu starts, the
    compile mode, the format and HF32 switches and the AOE dump made before the profiler starts, and the lesson's
    own profiler calls unchanged."""
    problems = ran_alone(out, step)
    if problems == ["not run"]:
        return Result("04's NPU-only fixes run on the device", False, "not run")
    calls = by_step(load(out)).get(step, [])
    taught, _ = taught_calls(out, device, step)
    imports = [c.get("tuning_env") for c in ok_calls(calls, "torch_npu", "import")]
    first_profile = next((i for i, c in enumerate(calls) if c["call"] == "profiler.profile"), len(calls))
    early = calls[:first_profile]
    modes = [c.get("jit_compile") for c in ok_calls(early, "torch_npu", "npu.set_compile_mode")]
    switches = {name: [c["args"][0] for c in ok_calls(early, "torch_npu", name)] for name in TUNING_CALLS}
    folder = Path(step_result(out, step)["folder"])
    aoe = [c["args"][0] for c in ok_calls(early, "torch_npu", "npu.set_aoe")]
    problems += taught + _failed(
        [
            (not imports or any(e != TUNING_ENV for e in imports), f"torch_npu imported with {imports}"),
            (modes != [False], f"set_compile_mode(jit_compile=...) {modes}"),
            (switches != TUNING_CALLS, f"switches {switches}"),
            (
                len(aoe) != 1 or not (folder / aoe[0]).resolve().is_relative_to((folder / "prof_out").resolve()),
                f"set_aoe {aoe}",
            ),
        ]
    )
    return Result(
        "04's NPU-only fixes (--npu-tuning task-queue cpu-affinity binary-operators hf32 aoe) are set as "
        "their sources say, before the profiler starts, in the lesson copied alone",
        not problems,
        "; ".join(problems) or f"import env {imports[0]}, jit_compile {modes}, {switches}, set_aoe {aoe}",
    )


def older_torch_npu(out: Path, device: int, step: str = "alone.01.pta60rc2") -> Result:
    """01's lesson copied alone, on a torch_npu before 6.0.RC3 (no ``npu.mstx.range_start``): it still runs every
    forward on device <dev>, marks them with record_function instead, and says so in one line."""
    problems = ran_alone(out, step)
    if problems == ["not run"]:
        return Result("01's copied lesson on torch_npu 6.0.RC2", False, "not run")
    calls = by_step(load(out)).get(step, [])
    chosen, used = devices_in(calls, {("torch_npu", "npu.set_device")}), devices_in(calls)
    notes = [line for line in step_result(out, step)["stderr_tail"].splitlines() if "mstx.range_start" in line]
    problems += _failed(
        [
            (chosen != [device] or used != [device], f"set_device {chosen}, devices used {used}"),
            (bool(ok_calls(calls, "torch_npu", "mstx.range_start")), "mstx ranges recorded on a release without them"),
            (len(notes) != 1 or "record_function" not in notes[0], f"notes {notes}"),
        ]
    )
    return Result(
        "01's lesson copied alone runs on torch_npu 6.0.RC2 (no npu.mstx.range_start): record_function "
        "ranges instead, said in one line",
        not problems,
        "; ".join(problems) or f"{notes[0]}",
    )


def copied_cmake_project(out: Path, device: int, step: str = "alone.02.cmake") -> Result:
    """02's C++ project copied alone (CMakeLists.txt, add_kernel.cpp, main.cpp) configures and builds with the command
    its README documents, against a cmake stand-in whose build fails, as CANN's kernel scripts do, when
    CMAKE_BUILD_TYPE is empty: the CMakeLists' own default (Release) must reach the kernel build."""
    found = step_result(out, step)
    if not found:
        return Result("02's copied C++ project builds with its documented command", False, "not run")
    calls = by_step(load(out)).get(step, [])
    configure = [c for c in calls if c["tool"] == "cmake" and c["call"] == "configure"]
    build = [c for c in calls if c["tool"] == "cmake" and c["call"] == "build"]
    problems = _failed(
        [
            (found["rc"] != 0, f"exit {found['rc']}: {found['stderr_tail'][-300:]}"),
            (
                len(configure) != 1 or configure[0].get("build_type") != "Release",
                f"configured with build type {[c.get('build_type') for c in configure]}",
            ),
            (len(build) != 1 or build[0].get("rc") != 0 or build[0].get("refused"), f"build {build}"),
            ("CMAKE_BUILD_TYPE" in found.get("command", ""), "the documented command passes the build type itself"),
        ]
    )
    return Result(
        "02's copied C++ project (3 files) configures and builds with the README's command; the build "
        "type CANN's kernel scripts need comes from CMakeLists.txt's default",
        not problems,
        "; ".join(problems) or f"$ {found.get('command')}: build type {configure[0].get('build_type')}",
    )


def reference_rows(out: Path | None = None, device: int | None = None) -> Result:
    if not REFERENCE.is_file():
        return Result("docs/npu_reference.md lists the facts checked here", False, f"{REFERENCE.name} not written yet")
    rows = [line for line in REFERENCE.read_text().splitlines() if line.lstrip().startswith("|")]
    missing = [fact for fact in FACTS.values() if not any(fact in row for row in rows)]
    return Result(
        "docs/npu_reference.md lists the facts checked here",
        not missing,
        f"{len(rows)} table rows; missing: {missing or 'none'}",
    )


CHECKS = {
    "detection": detection,
    "no_visible_devices": no_visible_devices,
    "runtime_logs": runtime_logs,
    "select_01": lambda o, d: program_selects(o, d, "01", {("torch_npu", "npu.set_device")}),
    "select_02": lambda o, d: (
        program_selects(o, d, "02", {("ascendcl", "aclrtSetDevice")})
        if ATLAS_A2_A3.fullmatch(soc_of(o))
        else Result("02: not run outside Atlas A2/A3 (see the msprof op check)", True, soc_of(o))
    ),
    "select_03": lambda o, d: program_selects(o, d, "03.msprof", {("acl", "rt.set_device")}),
    "select_03_acl_prof": lambda o, d: program_selects(o, d, "03.acl_prof", {("acl", "rt.set_device")}),
    "select_04": lambda o, d: program_selects(o, d, "04", {("torch_npu", "npu.set_device")}),
    "pyacl_order": pyacl_order,
    "pyacl_config_device": pyacl_config_device,
    "msprof_argv": msprof_argv,
    "msprof_op": msprof_op,
    "pyasc_npu": pyasc_npu,
    "pyasc_simulator": pyasc_simulator,
    "atc_variants": atc_variants,
    "output_dims": output_dims,
    "precision_dump": precision_dump,
    "precision_dump_other_names": lambda o, d: precision_dump(o, d, "precision.other_names"),
    "no_refusals": no_refusals,
    "reports_ran": reports_ran,
    "device_in_outputs": device_in_outputs,
    "ddp": ddp,
    "dynamic_04": dynamic_04,
    "dynamic_04_pta71": lambda o, d: dynamic_04(o, d, "04.dynamic_pta71"),
    "lessons_alone": lessons_alone,
    "npu_tuning": npu_tuning,
    "older_torch_npu": older_torch_npu,
    "copied_cmake_project": copied_cmake_project,
    "reference_rows": reference_rows,
}


def evaluate(out: Path, device: int) -> list[Result]:
    return [check(out, device) for check in CHECKS.values()]


def render(results: list[Result]) -> str:
    lines = ["", "NPU dry run: documented behaviour"]
    for r in results:
        lines.append(f"  [{'PASS' if r.ok else 'FAIL'}] {r.name}\n         {r.detail}")
    held = sum(r.ok for r in results)
    lines.append(f"{held} of {len(results)} hold")
    return "\n".join(lines)
