# TEST DOUBLE for the NPU dry run: msprof, msprof op, atc, npu-smi, cmake and msaccucmp stand-ins; never used outside
# tests.
"""``python tools.py <tool> <argv...>``: what the fake CANN tree's ``bin/`` shims run.

Each stand-in checks its command line the way the real tool does (options it does not know,
values outside the documented lists, a missing program), records the call in calls.jsonl,
runs the program it wraps unchanged, and writes the real tool's output files by replaying
real captures (modules/npu_dryrun_replay.py). A refused call exits non-zero, as the tool would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "modules"))

import npu_dryrun_record as rec
import npu_dryrun_replay as replay

UNDER_VAR = rec.UNDER_VAR


def refuse(tool: str, call: str, argv: list[str], message: str, code: int = 1) -> int:
    rec.record(tool, call, argv, rc=code, refused=message)
    print(f"[ERROR] {tool}: {message}", file=sys.stderr)
    return code


def split_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """Leading ``--key=value`` options, then the program and its arguments (msprof's order)."""
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            return argv[:i], argv[i:]
    return argv, []


def parse_options(options: list[str]) -> tuple[dict[str, str], str | None]:
    values: dict[str, str] = {}
    for opt in options:
        if "=" not in opt:
            return values, f"option {opt!r} needs a value (--name=value)"
        key, value = opt[2:].split("=", 1)
        if key in values:
            return values, f"option --{key} given twice"
        values[key] = value
    return values, None


# ----- msprof ---------------------------------------------------------------------------------------
ON_OFF = ("on", "off")
MSPROF_METRICS = (
    "ArithmeticUtilization",
    "PipeUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
)  # 910B: no PipelineExecuteUtilization
MSPROF_OPTIONS = {
    "output": None,
    "ascendcl": ON_OFF,
    "runtime-api": ON_OFF,
    "task-time": ("on", "off", "l0", "l1", "l2", "l3"),
    "task-memory": ON_OFF,
    "ai-core": ON_OFF,
    "aic-mode": ("task-based", "sample-based"),
    "aic-metrics": MSPROF_METRICS,
    "aicpu": ON_OFF,
    "msproftx": ON_OFF,
    "hccl": ON_OFF,
    "l2": ON_OFF,
    "ge-api": ("off", "l0", "l1"),
    "export": ON_OFF,
    "analyze": ON_OFF,
    "parse": ON_OFF,
    "type": ("text", "db"),
    "clear": ON_OFF,
    "summary-format": ("csv", "json"),
    "storage-limit": None,
    "sys-hardware-mem": ON_OFF,
    "rule": None,
}


def check_values(values: dict[str, str], allowed: dict) -> str | None:
    for key, value in values.items():
        if key not in allowed:
            return f"unrecognized option --{key}"
        choices = allowed[key]
        if choices is not None and value not in choices:
            return f"--{key}={value!r} is not one of {', '.join(choices)}"
    return None


def run_app(app: list[str], tag: str) -> tuple[int, list[dict]]:
    """Run the program unchanged (inheriting stdio and environment); the calls it made, by their tag."""
    if "/" not in app[0] and not shutil.which(app[0]):
        return 127, []
    start = len(rec.read_calls())
    env = dict(os.environ, **{UNDER_VAR: tag})
    code = subprocess.run(app, env=env, check=False).returncode
    made = [c for c in rec.read_calls()[start:] if c.get("under") == tag]
    return code, made


def devices_used(calls: list[dict]) -> list[int]:
    """Logical devices the program selected successfully (pyACL, AscendCL or torch_npu)."""
    used = set()
    for c in calls:
        if c.get("rc", 0) != 0:
            continue
        if (c["tool"], c["call"]) in {
            ("acl", "rt.set_device"),
            ("ascendcl", "aclrtSetDevice"),
            ("torch_npu", "npu.set_device"),
            ("torch_npu", "tensor.to"),
        }:
            used.add(int(c["args"][0]))
    return sorted(used)


def msprof(argv: list[str]) -> int:
    if argv[:1] == ["op"]:
        return msprof_op(argv[1:])
    options, app = split_options(argv)
    values, problem = parse_options(options)
    problem = problem or check_values(values, MSPROF_OPTIONS)
    call = "export" if values.get("export") == "on" else "analyze" if values.get("analyze") == "on" else "collect"
    if problem:
        return refuse("msprof", call, argv, problem)
    if "output" not in values:
        return refuse("msprof", call, argv, "--output is required")
    output = Path(values["output"])
    if call in ("export", "analyze"):
        if app:
            return refuse("msprof", call, argv, f"--{call}=on takes no program, got {app[0]!r}")
        profs = [output] if output.name.startswith("PROF_") else sorted(output.glob("PROF_*"))
        profs = [p for p in profs if p.is_dir() and (p / "host").is_dir()]
        if not profs:
            return refuse("msprof", call, argv, f"no collected PROF_* data under {output}")
        rec.record("msprof", call, argv, rc=0)
        for prof in profs:
            devices = replay.raw_devices(prof)
            if call == "export" and devices:
                replay.write_export(prof, devices[0])
            elif call == "analyze":
                (prof / "analyze").mkdir(exist_ok=True)
        return 0
    code, made = collect_app("msprof", argv, app, None, "msprof")
    if made is None:
        return code
    output.mkdir(parents=True, exist_ok=True)
    devices = devices_used(made)
    prof = replay.write_raw_prof(output, devices)
    if devices:  # collection ends with the export: mindstudio_profiler_output/ beside the raw data
        replay.write_export(prof, devices[0])
    rec.record("msprof", "collect.done", [str(prof)], rc=code, devices=devices)
    return code


OP_METRICS = (
    "Default",
    "ArithmeticUtilization",
    "L2Cache",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "PipeUtilization",
    "ResourceConflictRatio",
    "BasicInfo",
    "KernelScale",
    "Roofline",
    "TimelineDetail",
    "Occupancy",
    "MemoryDetail",
    "Source",
    "PipeTimeline",
    "PcSampling",
)
MSPROF_OP_OPTIONS = {
    "output": None,
    "kernel-name": None,
    "launch-count": None,
    "aic-metrics": None,
    "launch-skip-before-match": None,
    "warm-up": None,
    "replay-mode": ("kernel", "application", "range"),
    "kill": ON_OFF,
    "mstx": ON_OFF,
}


def msprof_op(argv: list[str]) -> int:
    if argv[:1] == ["simulator"]:
        return msprof_op_simulator(argv[1:])
    tool = "msprof op"
    values, app, metrics, problem = read_op_options(argv, MSPROF_OP_OPTIONS, "Default", OP_METRICS, "unknown metric")
    # msOpProf user guide (docs/en/user_guide/msopprof_user_guide.md): --launch-count 1..5000,
    # --launch-skip-before-match 0..1000. --warm-up's range is not read here: the stand-in only checks it is a count.
    problem = problem or out_of_range(
        values, (("launch-count", 1, 5000), ("launch-skip-before-match", 0, 1000), ("warm-up", 0, 10**6))
    )
    code, made = collect_app(tool, argv, app, problem, "msprof-op")
    if made is None:
        return code
    # As the tool does: the first --launch-skip-before-match launches are skipped whatever kernel they
    # run ("the counter increases regardless of whether [it] matches the operator specified in
    # kernel-name"), then launches whose kernel name starts with --kernel-name are collected.
    name = values.get("kernel-name", "")
    launches = [c for c in made if c["call"] == "launch"][int(values.get("launch-skip-before-match", 0)) :]
    matching = [c for c in launches if str(c["args"][0]).startswith(name)]
    collected = matching[: int(values.get("launch-count", 1))]
    if not collected:
        print(f"[WARNING] msprof op: no launch of kernel {name!r} left to collect", file=sys.stderr)
        rec.record(tool, "collect.done", [], rc=code, launches=0)
        return code
    out = replay.write_opprof(Path(values.get("output", ".")), int(collected[0]["args"][2]))
    rec.record(
        tool, "collect.done", [str(out)], rc=code, launches=len(collected), region_honoured="KernelScale" in metrics
    )
    return code


def read_op_options(
    argv: list[str], table: dict, default_metrics: str, known: tuple[str, ...], unknown: str
) -> tuple[dict[str, str], list[str], list[str], str | None]:
    """msprof op's and its simulator's ``--key=value`` options: (values, the application, the --aic-metrics list,
    the first problem: a malformed or unknown option, a value off its list, a metric not in ``known``)."""
    options, app = split_options(argv)
    values, problem = parse_options(options)
    problem = problem or check_values(values, table)
    metrics = values.get("aic-metrics", default_metrics).split(",")
    if not problem and any(m not in known for m in metrics):
        problem = f"--aic-metrics={values['aic-metrics']!r}: {unknown} (one of {', '.join(known)})"
    return values, app, metrics, problem


def collect_app(tool: str, argv: list[str], app: list[str], problem: str | None, tag: str) -> tuple[int, list | None]:
    """What msprof, msprof op and its simulator do once their options are read: refuse (``problem``, no
    application, an application not found) or record the call and run the application; (exit code, the calls
    it made, None when refused)."""
    if problem:
        return refuse(tool, "collect", argv, problem), None
    if not app:
        return refuse(tool, "collect", argv, "no application to profile (the program goes after the options)"), None
    rec.record(tool, "collect", argv)
    code, made = run_app(app, f"{tag}:{os.getpid()}")
    if code == 127:
        return refuse(tool, "collect", argv, f"application {app[0]!r} not found", 127), None
    return code, made


def out_of_range(values: dict[str, str], ranges) -> str | None:
    """The refusal for the first ``--key=value`` that is not an integer in its (key, low, high) range; None if none."""
    for key, low, high in ranges:
        if key in values and not (values[key].isdigit() and low <= int(values[key]) <= high):
            return f"--{key}={values[key]!r} is not an integer in {low}..{high}"
    return None


# msOpProf simulator mode user guide (docs/en/user_guide/msopprof_simulator_user_guide.md), "Command Reference".
SIM_METRICS = ("PipeUtilization", "ResourceConflictRatio", "PMSampling")
MSPROF_OP_SIM_OPTIONS = {
    "output": None,
    "kernel-name": None,
    "launch-count": None,
    "aic-metrics": None,
    "core-id": None,
    "timeout": None,
    "mstx": ON_OFF,
    "mstx-include": None,
    "soc-version": None,
    "dump": ON_OFF,
    "config": None,
    "export": None,
}


def msprof_op_simulator(argv: list[str]) -> int:
    tool = "msprof op simulator"
    values, app, metrics, problem = read_op_options(
        argv, MSPROF_OP_SIM_OPTIONS, "PipeUtilization,ResourceConflictRatio", SIM_METRICS, "not a simulator metric"
    )
    problem = problem or out_of_range(values, (("launch-count", 1, 5000), ("timeout", 1, 2880)))
    # --soc-version names a simulator under ${INSTALL_DIR}/tools/simulator; without it LD_LIBRARY_PATH must.
    if not problem and "soc-version" in values and not SOC_VERSIONS.fullmatch(values["soc-version"]):
        problem = f"--soc-version={values['soc-version']!r} is not a simulator of this CANN"
    if not problem and "soc-version" not in values and "tools/simulator/" not in os.environ.get("LD_LIBRARY_PATH", ""):
        problem = (
            "no simulator chosen: pass --soc-version or put ${INSTALL_DIR}/tools/simulator/<soc>/lib on LD_LIBRARY_PATH"
        )
    code, made = collect_app(tool, argv, app, problem, "msprof-op-sim")
    if made is None:
        return code
    name = values.get("kernel-name", "")
    launches = [c for c in made if c["call"] == "launch" and str(c["args"][0]).startswith(name)]
    collected = launches[: int(values.get("launch-count", 1))]
    if not collected:
        print(f"[WARNING] msprof op simulator: no launch of kernel {name!r} to simulate", file=sys.stderr)
        rec.record(tool, "collect.done", [], rc=code, launches=0)
        return code
    out = replay.write_opprof_simulator(Path(values.get("output", ".")), int(collected[0]["args"][1]))
    rec.record(
        tool,
        "collect.done",
        [str(out)],
        rc=code,
        launches=len(collected),
        soc_version=values.get("soc-version"),
        backend=collected[0].get("backend"),
    )
    return code


# ----- atc --------------------------------------------------------------------------------------------
PRECISION_MODES = (
    "force_fp16",
    "force_fp32",
    "cube_fp16in_fp32out",
    "allow_mix_precision",
    "allow_fp32_to_fp16",
    "must_keep_origin_dtype",
    "allow_mix_precision_fp16",
    "allow_mix_precision_bf16",
    "allow_fp32_to_bf16",
)
PRECISION_MODES_V2 = (
    "fp16",
    "origin",
    "cube_fp16in_fp32out",
    "mixed_float16",
    "mixed_bfloat16",
    "cube_hif8",
    "mixed_hif8",
)
ATC_OPTIONS = {
    "model": None,
    "framework": ("0", "1", "3", "5"),
    "output": None,
    "soc_version": None,
    "input_shape": None,
    "input_fp16_nodes": None,
    "output_type": None,
    "precision_mode": PRECISION_MODES,
    "precision_mode_v2": PRECISION_MODES_V2,
    "mode": ("0", "1", "3", "6"),
    "om": None,
    "json": None,
    "log": ("debug", "info", "warning", "error", "null"),
    "input_format": None,
    "out_nodes": None,
    "keep_dtype": None,
    "op_select_implmode": None,
    "allow_hf32": ("true", "false"),
    "is_input_adjust_hw_layout": None,
    "modify_mixlist": None,
    "op_precision_mode": None,
}
OM_MAGIC = "NPU_DRYRUN_OM"
# The SoC names CANN knows (torch_npu NpuVariables.cpp socVersionMap; 310P5/7 from its SocVersion enum).
SOC_VERSIONS = re.compile(
    r"Ascend(910PremiumA|910ProA|910A|910ProB|910B|310P[1-57]|910B[1-4]|910B2C|910B4-1"
    r"|310B[1-4]|910_93[0-9]{2})"
)
DTYPES = {"FP32": "float32", "FP16": "float16", "UINT8": "uint8", "INT8": "int8"}


def atc(argv: list[str]) -> int:
    values, problem = parse_options(argv)
    if not problem and any(not a.startswith("--") for a in argv):
        problem = "positional arguments are not accepted"
    problem = problem or check_values(values, ATC_OPTIONS)
    call = "mode1" if values.get("mode") == "1" else "convert"
    if problem:
        return refuse("atc", call, argv, problem)
    if call == "mode1":
        om, out = values.get("om"), values.get("json")
        if not om or not out:
            return refuse("atc", call, argv, "--mode=1 needs --om and --json")
        try:
            header = json.loads(Path(om).read_text())
            assert header.get("magic") == OM_MAGIC
        except (OSError, ValueError, AssertionError):
            return refuse("atc", call, argv, f"{om} is not an offline model this atc wrote")
        graph = {"name": header["name"], "op": header["ops"]}
        Path(out).write_text(json.dumps({"name": header["name"], "graph": [graph]}, indent=2))
        rec.record("atc", call, argv, rc=0)
        return 0
    for key in ("model", "framework", "output", "soc_version"):
        if key not in values:
            return refuse("atc", call, argv, f"--{key} is required")
    if not SOC_VERSIONS.fullmatch(values["soc_version"]):
        return refuse("atc", call, argv, f"--soc_version={values['soc_version']!r} is not a supported SoC")
    if "precision_mode" in values and "precision_mode_v2" in values:
        return refuse("atc", call, argv, "--precision_mode and --precision_mode_v2 cannot be used together")
    model = Path(values["model"])
    if values["framework"] != "5" or model.suffix != ".onnx" or not model.is_file():
        return refuse("atc", call, argv, f"--model={model} is not an ONNX file (--framework=5)")
    try:
        header = om_header(model, values)
    except ValueError as err:
        return refuse("atc", call, argv, str(err))
    Path(values["output"] + ".om").write_text(json.dumps(header, indent=1))
    rec.record("atc", call, argv, rc=0)
    print("ATC run success, welcome to the next use.")
    return 0


def om_header(model: Path, values: dict[str, str]) -> dict:
    """What the stand-in .om holds: IO names, dims and dtypes as ATC would fix them, and the ONNX graph's ops."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    graph = onnx.load(str(model)).graph
    shapes = {}
    for item in filter(None, values.get("input_shape", "").split(";")):
        name, _, dims = item.partition(":")
        shapes[name] = [int(d) for d in dims.split(",")]
    inputs = [i.name for i in graph.input]
    fp16_in = [n for n in values.get("input_fp16_nodes", "").split(";") if n]
    for name in list(shapes) + fp16_in:
        if name not in inputs:
            raise ValueError(f"node {name!r} is not an input of the model ({', '.join(inputs)})")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = {
        i.name: np.zeros(shapes.get(i.name, [d if isinstance(d, int) else 1 for d in i.shape]), np.float32)
        for i in session.get_inputs()
    }
    outs = session.run(None, feeds)
    out_type = values.get("output_type", "FP32")
    if out_type not in DTYPES:
        raise ValueError(f"--output_type={out_type!r} is not one of {', '.join(DTYPES)}")
    ops = [{"name": f"data_{n}", "type": "Data"} for n in inputs]
    ops += [{"name": node.name or f"{node.op_type}_{k}", "type": node.op_type} for k, node in enumerate(graph.node)]
    ops.append({"name": "output_0", "type": "NetOutput"})
    return {
        "magic": OM_MAGIC,
        "name": Path(values["output"]).name,
        "onnx": str(model.resolve()),
        "graph_name": graph.name or "main_graph",  # the model's own name inside the .om, from the ONNX graph
        "soc_version": values["soc_version"],
        "precision_mode": values.get("precision_mode", "force_fp16"),
        "inputs": [
            {"name": n, "dims": list(feeds[n].shape), "dtype": "float16" if n in fp16_in else "float32"} for n in inputs
        ],
        "outputs": [
            {"name": o.name, "dims": list(v.shape), "dtype": DTYPES[out_type]}
            for o, v in zip(session.get_outputs(), outs)
        ],
        "ops": ops,
        "note": "NPU dry run stand-in: ops listed from the ONNX graph, nothing compiled",
    }


# ----- npu-smi ----------------------------------------------------------------------------------------
def npu_smi(argv: list[str]) -> int:
    n, chip = rec.physical_count(), os.environ.get(rec.SOC_VAR, "910B3")
    rule = "+===========================+===============+====================================================+"
    if argv == ["info"]:
        lines = [
            "+------------------------------------------------------------------------------------------------+",
            "| npu-smi 24.1.0                   Version: 24.1.0                                               |",
            "+---------------------------+---------------+----------------------------------------------------+",
            "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
            "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
            rule,
        ]
        for i in range(n):
            lines.append(f"| {i:<5} {chip:<19} | OK            | 92.6        38                0    / 0             |")
            lines.append(
                f"| 0                         | 0000:{0xC1 + i:02X}:00.0  | 0           0    / 0          3387 / 65536         |"
            )
            lines.append(rule)
        lines += [
            "+---------------------------+---------------+----------------------------------------------------+",
            "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |",
            rule,
            "| No running processes found in NPU 0                                                            |",
            rule,
        ]
        print("\n".join(lines))
    elif argv == ["info", "-l"]:
        print(f"        Total Count                    : {n}\n")
        for i in range(n):
            print(f"        NPU ID                         : {i}\n        Chip Count                     : 1\n")
    elif argv == ["info", "-m"]:
        print(
            "        NPU ID                         Chip ID                        Chip Logic ID                  Chip Name"
        )
        for i in range(n):
            print(f"        {i:<30} {0:<30} {i:<30} Ascend {chip}")
    else:
        return refuse(
            "npu-smi",
            " ".join(argv[:1]) or "(none)",
            argv,
            "command not supported by the stand-in (info, info -l, info -m)",
            2,
        )
    rec.record("npu-smi", " ".join(argv), argv, rc=0)
    return 0


# ----- cmake (02's npu build) -------------------------------------------------------------------------
ACL_STUB = HERE.parent / "native" / "acl_stub"  # CANN's declarations for main.cpp's NPU branch (headers only)
RUNTIME = HERE / "native" / "acl_dryrun.cpp"
TWIN = HERE.parents[1] / "common" / "modes" / "ascendc" / "twin"  # the runtime adds fp16 with the twin's twin_half.h
ASCENDC_CMAKE = (
    "compiler/tikcpp/ascendc_kernel_cmake",
    "tools/tikcpp/ascendc_kernel_cmake",
    "ascendc_devkit/tikcpp/samples/cmake",
)
CONFIGURE = "npu_dryrun_configure.json"


def real_cmake() -> str | None:
    ours = Path(sys.argv[0]).resolve().parent
    path = os.pathsep.join(
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p
        and Path(p).resolve() != Path(os.environ.get("NPU_DRYRUN_BIN", "/nonexistent")).resolve()
        and Path(p).resolve() != ours
    )
    return shutil.which("cmake", path=path)


def cmake(argv: list[str]) -> int:
    if argv[:1] == ["--build"]:
        return cmake_build(argv)
    defs = dict(a[2:].split("=", 1) for a in argv if a.startswith("-D") and "=" in a)
    if defs.get("RUN_MODE") != "npu":  # portable / cpu builds are not the NPU path: the real CMake does them
        found = real_cmake()
        if not found:
            return refuse("cmake", "configure", argv, "no real cmake for a non-npu build")
        return subprocess.run([found, *argv], check=False).returncode
    try:
        source, build = Path(argv[argv.index("-S") + 1]), Path(argv[argv.index("-B") + 1])
    except (ValueError, IndexError):
        return refuse("cmake", "configure", argv, "-S <source> and -B <build> are required")
    cann = Path(defs.get("ASCEND_CANN_PACKAGE_PATH", ""))
    if not (source / "CMakeLists.txt").is_file():
        return refuse("cmake", "configure", argv, f"{source} has no CMakeLists.txt")
    has_ascendc = any((cann / d / "ascendc.cmake").is_file() for d in ASCENDC_CMAKE)
    if not defs.get("SOC_VERSION") or not defs.get("ASCEND_CANN_PACKAGE_PATH") or not has_ascendc:
        return refuse(
            "cmake",
            "configure",
            argv,
            "RUN_MODE=npu needs SOC_VERSION and CANN's ascendc.cmake under ASCEND_CANN_PACKAGE_PATH",
        )
    build_type = defs.get("CMAKE_BUILD_TYPE") or default_build_type(source / "CMakeLists.txt")
    build.mkdir(parents=True, exist_ok=True)
    (build / CONFIGURE).write_text(
        json.dumps({"source": str(source.resolve()), "defs": defs, "build_type": build_type}, indent=2)
    )
    rec.record("cmake", "configure", argv, rc=0, build_type=build_type)
    print(
        f"-- add_custom: RUN_MODE=npu (dry run stand-in), SOC_VERSION={defs['SOC_VERSION']}, "
        f"CMAKE_BUILD_TYPE={build_type or '(empty)'}"
    )
    return 0


def default_build_type(cmakelists: Path) -> str:
    """The build type a CMakeLists.txt sets when none is given (``if(NOT CMAKE_BUILD_TYPE) set(... X ...)``): what
    CMake would hand CANN's ascendc_library; empty when the file sets none."""
    found = re.search(
        r"if\s*\(\s*NOT\s+CMAKE_BUILD_TYPE\s*\)\s*set\s*\(\s*CMAKE_BUILD_TYPE\s+(\w+)", cmakelists.read_text()
    )
    return found[1] if found else ""


def cmake_build(argv: list[str]) -> int:
    build = Path(argv[1]) if len(argv) > 1 else Path(".")
    conf = build / CONFIGURE
    if not conf.is_file():
        found = real_cmake()
        return (
            subprocess.run([found, *argv], check=False).returncode
            if found
            else refuse("cmake", "build", argv, f"{build} was not configured")
        )
    configured = json.loads(conf.read_text())
    source = Path(configured["source"])
    if not configured.get("build_type"):
        # CANN 8.5's ascendc_library hands CMAKE_BUILD_TYPE to merge_mix_obj.sh as --build-type; with no value the
        # script's argument loop fails under set -e and the kernel never links (npu_reference.md CANN-KERNEL-CMAKE)
        return refuse(
            "cmake",
            "build",
            argv,
            "CANN's kernel merge script got no build type (CMAKE_BUILD_TYPE is "
            "empty: pass -DCMAKE_BUILD_TYPE=Release or set a default in CMakeLists.txt)",
            code=2,
        )
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        return refuse("cmake", "build", argv, "no C++ compiler for the stand-in host program")
    # main.cpp's NPU branch, unchanged, against CANN's declarations (tests/native/acl_stub headers)
    # and a recording runtime; add_kernel.cpp is device code, built only by ascendc_library.
    compile_argv = [
        cxx,
        "-std=c++17",
        "-O1",
        "-DLAB_RUN_NPU",
        "-I",
        str(ACL_STUB),
        "-I",
        str(TWIN),
        str(source / "main.cpp"),
        str(RUNTIME),
        "-o",
        str(build / "add_custom_main"),
    ]
    code = subprocess.run(compile_argv, check=False).returncode
    rec.record(
        "cmake",
        "build",
        argv,
        rc=code,
        compiled=compile_argv[1:],
        kernel_calls=kernel_calls(cxx, source, json.loads(conf.read_text())["defs"], build),
    )
    return code


def kernel_calls(cxx: str, source: Path, defs: dict[str, str], build: Path) -> list[str]:
    """The MetricsProf calls add_kernel.cpp keeps as ascendc_library would compile it: preprocessed with the
    one kernel definition CMakeLists.txt adds (LAB_METRICS_PROF_REGION when that option is ON)."""
    headers = build / "npu_dryrun_kernel_headers"  # kernel_operator.h is CANN's; empty here, only #if matters
    headers.mkdir(exist_ok=True)
    (headers / "kernel_operator.h").write_text("")
    region = defs.get("LAB_METRICS_PROF_REGION", "OFF").upper() in ("ON", "1", "TRUE", "YES")
    proc = subprocess.run(
        [
            cxx,
            "-E",
            "-P",
            "-x",
            "c++",
            "-I",
            str(headers),
            "-I",
            str(source),
            *(["-DLAB_METRICS_PROF_REGION"] if region else []),
            str(source / "add_kernel.cpp"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return sorted(set(re.findall(r"\bMetricsProf(?:Start|Stop)\b", proc.stdout)))


# msaccucmp.py convert's options (MSACCUCMP-CONVERT) and its -t values; a dump file's name (ACL-DUMP-DATA).
MSACCUCMP_OPTIONS = {
    "-d": "dump_file",
    "--dump_file": "dump_file",
    "-out": "output",
    "--output": "output",
    "-v": "version",
    "--version": "version",
    "-t": "type",
    "--type": "type",
}
MSACCUCMP_TYPES = ("npy", "msnpy", "bin", "pt")
DUMP_FILE = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[0-9]+\.[0-9]+\.[0-9]{16}$")


def msaccucmp(argv: list[str]) -> int:
    """``msaccucmp.py convert -d <file|f1,f2|folder> [-out dir] [-v 2] [-t npy]``: one ``<name>.output.0.npy`` per
    dump file (the stand-in's dumps hold one output each; with NPU_DRYRUN_CONVERT_SHAPE=1,
    ``<name>.output.0.<shape>.npy``). -d takes files or one folder of files, not a tree."""
    if argv[:1] != ["convert"]:
        return refuse("msaccucmp", "convert", argv, "the lab only calls the convert subcommand")
    values, rest = {}, argv[1:]
    while rest:
        key = MSACCUCMP_OPTIONS.get(rest[0])
        if key is None or len(rest) < 2:
            return refuse("msaccucmp", "convert", argv, f"unknown option or missing value: {rest[0]}")
        values[key], rest = rest[1], rest[2:]
    if "dump_file" not in values:
        return refuse("msaccucmp", "convert", argv, "-d is required")
    if values.get("type", "npy") not in MSACCUCMP_TYPES:
        return refuse("msaccucmp", "convert", argv, f"-t must be one of {', '.join(MSACCUCMP_TYPES)}")
    given = [Path(p) for p in values["dump_file"].split(",")]
    files = sorted(p for p in given[0].iterdir() if p.is_file()) if len(given) == 1 and given[0].is_dir() else given
    dumps = [p for p in files if p.is_file() and DUMP_FILE.match(p.name)]
    if not dumps:
        return refuse("msaccucmp", "convert", argv, "no dump file there (-d is not recursive)")
    out = Path(values.get("output", "."))
    if not out.is_dir():
        return refuse("msaccucmp", "convert", argv, f"-out {out} is not an existing folder")
    import numpy as np

    shape = os.environ.get("NPU_DRYRUN_CONVERT_SHAPE") == "1"  # names as CANN 8.0's converter may write them
    for path in dumps:
        array = np.load(path)
        suffix = f".{'x'.join(map(str, array.shape))}" if shape else ""  # <name>.output.0.<d0>x<d1>.npy
        np.save(out / f"{path.name}.output.0{suffix}.npy", array)
    rec.record("msaccucmp", "convert", argv, rc=0, converted=len(dumps))
    print(f"msaccucmp (dry run stand-in): {len(dumps)} dump file(s) converted into {out}")
    return 0


TOOLS = {"msprof": msprof, "atc": atc, "npu-smi": npu_smi, "cmake": cmake, "msaccucmp": msaccucmp}

if __name__ == "__main__":
    sys.exit(TOOLS[sys.argv[1]](sys.argv[2:]))
