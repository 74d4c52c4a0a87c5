# TEST DOUBLE driver: runs every mode's NPU path against the stand-ins and checks calls.jsonl; never used outside tests.
"""The NPU dry run: ``python -m tests.npu_dryrun [device] [--out DIR] [--chip NAME] [--skip-ddp]`` (``nox -s npu_dryrun``).

1. ``<out>/`` (default ``npu_dryrun/`` at the repository root) is made with the lab's marker;
   a fake CANN tree goes to ``<out>/cann`` (pyACL in its python/site-packages), the torch_npu
   stand-in to ``<out>/torch_site``, and a private copy of the lab to ``<out>/lab`` (the
   modes write their build/, model/ and prof_out/ folders there, not into the working tree).
2. With MSPROF_LAB_BACKEND=npu, ASCEND_HOME_PATH=<out>/cann, PATH and PYTHONPATH as CANN's
   set_env.sh would set them, every mode's scripts run as a user runs them, for ``device``, on a
   stand-in machine of eight ``--chip`` chips (npu-smi's Name column, default 910B3). A
   ``SOC_VERSION`` in the environment reaches the lab as a user's would.
3. Every stand-in appends its calls to ``<out>/calls.jsonl``; each step's output is kept in
   ``<out>/logs/<step>.log`` and its prof_out/ in ``<out>/results/<step>/``; ``<out>/summary.json``
   says how each step ended. Two steps run again with the stand-ins posing otherwise (``POSES``): dynamic
   profiling as torch_npu 7.1.0 (``04.dynamic_pta71``; ``04.dynamic`` poses as 7.2.0), and the per-op dump
   with its folder named by the model's internal name and converted names carrying a shape
   (``precision.other_names``).
4. Then every Python lesson file is copied **alone** into ``<out>/alone/<step>/`` (nothing of the lab
   beside it) and run there as a user on an NPU machine runs it: ``python <lesson> <NPU arguments>``,
   with CANN's set_env.sh and torch_npu's stand-in on PYTHONPATH but not the lab, and none of the lab's
   variables (steps ``alone.01``, ``alone.02``, ``alone.03``, ``alone.04``; 03 loads the .om ``03.build`` made).
   02's C++ project (its three files) is copied alone the same way and built with the command its README
   documents (``alone.02.cmake``), against a cmake stand-in that stops, as CANN's kernel scripts do, when no
   build type reaches them.
5. The documented NPU behaviour is checked (expectations.py) and printed; the exit code is 0 only when
   every expectation holds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.helpers import copy_lab
from tests.npu_dryrun import expectations, fake_cann

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODULES = HERE / "modules"
STEP_TIMEOUT_S = 600
DEFAULT_CHIP = "910B3"
SIMULATOR_SOC = "Ascend910B1"  # mode 02's pyasc kernel under msprof op simulator (pyasc's default Model SoC)
CHIP = re.compile(r"[0-9]{3}[0-9A-Za-z_]*(?:-[0-9A-Za-z_]+)?")  # as npu-smi's Name column spells it
PROBE = """
import json
from common.backend import detect, soc_version
b = detect()
print(json.dumps({"name": b.name, "reason": b.reason, "devices": list(b.devices), "tools": sorted(b.tools),
                  "python_modules": list(b.python_modules), "soc": soc_version(b, %d) if b.is_npu else None}))
"""


def steps(device: int, ddp: bool) -> list[tuple[str, list[str], str | None]]:
    """(name, argv, the prof_out folder to keep) for every mode's NPU path, in the order a user runs them."""
    d = str(device)
    out = [
        ("detect", [sys.executable, "-c", PROBE % device], None),
        ("01", ["bash", "01_cmdline/run.sh", d], "01_cmdline/prof_out"),
        ("02.build", ["bash", "02_api_AscendC/build.sh", "--device", d], None),
        ("02", ["bash", "02_api_AscendC/run.sh", d], "02_api_AscendC/prof_out"),
        ("02.pyasc", ["bash", "02_api_AscendC/run.sh", d, "--kernel", "pyasc"], "02_api_AscendC/prof_out"),
        (
            "02.pyasc_sim",
            ["bash", "02_api_AscendC/run.sh", d, "--kernel", "pyasc", "--simulator", SIMULATOR_SOC],
            "02_api_AscendC/prof_out",
        ),
        ("03.build", ["bash", "03_api_pyAcl/build_model.sh", "all", "--device", d], None),
        ("03.msprof", ["bash", "03_api_pyAcl/run.sh", d, "all"], "03_api_pyAcl/prof_out"),
        ("03.acl_prof", ["bash", "03_api_pyAcl/run.sh", d, "default", "--acl-prof"], "03_api_pyAcl/prof_out"),
        ("precision", [sys.executable, "-m", "common", "precision", d], "precision_out"),
        ("precision.other_names", [sys.executable, "-m", "common", "precision", d], "precision_out"),
        ("04", ["bash", "04_pyTorch/run.sh", d], "04_pyTorch/prof_out"),
        ("04.dynamic", ["bash", "04_pyTorch/run_dynamic.sh", d], "04_pyTorch/prof_out_dynamic"),
        ("04.dynamic_pta71", ["bash", "04_pyTorch/run_dynamic.sh", d], "04_pyTorch/prof_out_dynamic"),
    ]
    if ddp:
        pair = sorted({device, (device + 1) % 8})
        out.append(
            (
                "04.ddp",
                ["bash", "04_pyTorch/run_ddp.sh", str(len(pair)), ",".join(map(str, pair))],
                "04_pyTorch/prof_out_ddp",
            )
        )
    return out


# Steps that run again with the stand-ins posing otherwise, where the real tools may differ (docs/npu_reference.md):
PTA_RELEASE = "7.2.0"  # the torch_npu release the stand-in poses as: start_step -1 means "the next step"
POSES = {
    "04.dynamic_pta71": {"NPU_DRYRUN_PTA_VERSION": "7.1.0"},  # before 7.2.0: start_step -1 becomes 0, never reached
    # the ACL dump's folder named by the model's name inside the .om, converted names with a ".<shape>" suffix
    "precision.other_names": {"NPU_DRYRUN_DUMP_FOLDER": "internal", "NPU_DRYRUN_CONVERT_SHAPE": "1"},
    "alone.01.pta60rc2": {"NPU_DRYRUN_PTA_VERSION": "6.0.rc2"},  # before 6.0.RC3: no npu.mstx.range_start
}
LESSON_OM = "03_api_pyAcl/model/npu/tiny_mlp_default.om"  # an offline model the 03.build step makes
FIND_COMMON = "import importlib.util; spec = importlib.util.find_spec('common'); print(spec and spec.origin)"


TUNINGS = ("task-queue", "cpu-affinity", "binary-operators", "hf32", "aoe")  # the 04 lesson's NPU-only fixes


def lessons(device: int, lab: Path) -> list[tuple[str, str, list[str]]]:
    """(step, lesson file, its NPU arguments) for every Python lesson a user copies (issue 31), in mode order."""
    d = str(device)
    return [
        ("alone.01", "01_cmdline/src/model.py", ["--device", f"npu:{d}"]),
        ("alone.01.pta60rc2", "01_cmdline/src/model.py", ["--device", f"npu:{d}"]),
        ("alone.02", "02_api_AscendC/src/add_pyasc.py", ["-r", "NPU", "--device", d]),
        ("alone.03", "03_api_pyAcl/src/infer.py", ["--om", str(lab / LESSON_OM), "--device", d, "--out", "prof_out"]),
        ("alone.04", "04_pyTorch/src/model_with_profiler.py", ["--device", f"npu:{d}", "--out", "prof_out"]),
        (
            "alone.04.tuning",
            "04_pyTorch/src/model_with_profiler.py",
            ["--device", f"npu:{d}", "--out", "prof_out", "--npu-tuning", *TUNINGS],
        ),
    ]


PROJECT_02 = ("02_api_AscendC/src", ("CMakeLists.txt", "add_kernel.cpp", "main.cpp"))  # the copied C++ project
PROJECT_STEP = "alone.02.cmake"


def documented_npu_build(readme: Path = ROOT / "02_api_AscendC" / "README.md") -> str:
    """The NPU build command 02's README gives for the copied project (its cmake lines, continuations joined)."""
    text = readme.read_text(encoding="utf-8").split("**On an NPU**", 1)[1]
    block = text.split("```", 2)[1]
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("cmake "))
    command = []
    for line in lines[start:]:
        command.append(line.rstrip("\\").strip())
        if not line.endswith("\\"):
            break
    return " ".join(command)


def run_project(name: str, out: Path, env: dict[str, str]) -> dict:
    """02's three C++ files copied alone into ``<out>/alone/<step>/`` and built there with the command the README
    documents for a copied project (run by bash, as a user pastes it)."""
    folder = out / "alone" / name
    folder.mkdir(parents=True)
    source, files = PROJECT_02
    for file in files:
        shutil.copy2(ROOT / source / file, folder)
    command = documented_npu_build()
    result = run_step(name, ["bash", "-c", command], None, folder, out, env)
    return {**result, "folder": str(folder), "copied": sorted(files), "command": command}


def user_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` as a user's shell has it after CANN's set_env.sh: without the variables the lab sets for its modes."""
    return {k: v for k, v in env.items() if not k.startswith("MSPROF_LAB_") and k != "PYTHON"}


def run_lesson(name: str, lesson: str, args: list[str], out: Path, env: dict[str, str]) -> dict:
    """Copy ``lesson`` alone into ``<out>/alone/<step>/`` and run it there; the step's result says what the
    folder held, the PYTHONPATH it ran with and where ``import common`` would have found the lab (None: nowhere)."""
    folder = out / "alone" / name
    folder.mkdir(parents=True)
    shutil.copy2(ROOT / lesson, folder)
    copied = sorted(p.name for p in folder.iterdir())
    probe = subprocess.run(
        [sys.executable, "-c", FIND_COMMON],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result = run_step(name, [sys.executable, Path(lesson).name, *args], None, folder, out, env)
    return {
        **result,
        "lesson": lesson,
        "folder": str(folder),
        "copied": copied,
        "pythonpath": env.get("PYTHONPATH", "").split(os.pathsep),
        "common_found": probe.stdout.strip(),
    }


def base_env(out: Path, cann: Path, torch_site: Path, chip: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ASCEND_RT_VISIBLE_DEVICES", "RUN_MODE", "PYTHONPATH", "MSPROF_LAB_BACKEND")
    }
    env = fake_cann.environment(env, cann, torch_site)
    env.update(
        MSPROF_LAB_BACKEND="npu",
        PYTHON=sys.executable,
        KINETO_LOG_LEVEL="5",
        NPU_DRYRUN_CHIP=chip,
        MSPROF_LAB_RUN_ID=uuid.uuid4().hex,
        MSPROF_LAB_TIMEOUT_S=str(STEP_TIMEOUT_S - 60),
        NPU_DRYRUN_LOG=str(out / "calls.jsonl"),
        NPU_DRYRUN_CAPTURES=str(HERE / "captures"),
        NPU_DRYRUN_FIXTURES=str(ROOT / "tests" / "fixtures" / "npu"),
        NPU_DRYRUN_CANN_VERSION=fake_cann.CANN_VERSION,
        NPU_DRYRUN_PTA_VERSION=PTA_RELEASE,
    )
    return env


def mark(log: Path, call: str, name: str, **extra: object) -> None:
    with log.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": "dryrun", "call": call, "args": [name], "env": {}, **extra}) + "\n")


def run_step(name: str, argv: list[str], keep: str | None, cwd: Path, out: Path, env: dict[str, str]) -> dict:
    """Run ``argv`` in ``cwd`` between two markers of calls.jsonl; its log, and ``cwd/keep`` under results/."""
    log = out / "calls.jsonl"
    mark(log, "step.begin", name)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False
        )
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as err:
        code, stdout, stderr = 124, str(err.stdout or ""), str(err.stderr or "") + f"\n(timed out, {STEP_TIMEOUT_S} s)"
    seconds = round(time.monotonic() - start, 1)
    mark(log, "step.end", name, rc=code)
    (out / "logs" / f"{name}.log").write_text(f"$ {' '.join(argv)}\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
    kept = None
    if keep and (cwd / keep).is_dir():
        kept = out / "results" / name
        shutil.copytree(cwd / keep, kept, symlinks=True)
        kept = str(kept.relative_to(out))
    return {
        "name": name,
        "argv": argv,
        "rc": code,
        "seconds": seconds,
        "kept": kept,
        "traceback": "Traceback (most recent call last)" in stdout + stderr,
        "error_lines": [line for line in stderr.splitlines() if line.startswith("Error:")],
        "stdout_tail": stdout[-2000:],
        "stderr_tail": stderr[-2000:],
    }


def shown(result: dict) -> dict:
    print(f"[npu dry run] {result['name']:12} exit {result['rc']:>3}  {result['seconds']:>6} s", flush=True)
    return result


def run(device: int, out: Path, ddp: bool = True, chip: str = DEFAULT_CHIP, only: set[str] | None = None) -> dict:
    """The whole dry run into ``out`` (recreated); returns the summary also written to summary.json."""
    sys.path.insert(0, str(ROOT))
    from common.formats.rundir import prepare_output_dir

    out = prepare_output_dir(out)
    (out / "logs").mkdir()
    (out / "results").mkdir()
    cann = fake_cann.build(out / "cann", sys.executable, MODULES)
    # pip packages' stand-ins: torch_npu, and pyasc's asc (which computes with the lab's pyasc twin)
    torch_site = fake_cann.install_modules(MODULES, out / "torch_site", ("torch_npu", "asc"))
    lab = copy_lab(out / "lab")
    env = base_env(out, cann, torch_site, chip)
    env["NPU_DRYRUN_PYASC_TWIN"] = str(lab / "common" / "modes" / "ascendc" / "pyasc_twin" / "site" / "asc")
    # The SoC every step must use: $SOC_VERSION when the user set it, else the chip npu-smi lists.
    soc = os.environ.get("SOC_VERSION") or f"Ascend{chip}"
    summary = {
        "device": device,
        "out": str(out),
        "cann": str(cann),
        "lab": str(lab),
        "chip": chip,
        "soc": soc,
        "steps": [],
    }
    for name, argv, keep in steps(device, ddp):
        if only is not None and name not in only:
            continue
        summary["steps"].append(shown(run_step(name, argv, keep, lab, out, {**env, **POSES.get(name, {})})))
    for name, lesson, args in lessons(device, lab):
        if only is not None and name not in only:
            continue
        summary["steps"].append(shown(run_lesson(name, lesson, args, out, user_env({**env, **POSES.get(name, {})}))))
    if only is None or PROJECT_STEP in only:
        summary["steps"].append(shown(run_project(PROJECT_STEP, out, user_env(env))))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def step_names() -> list[str]:
    """Every step of the whole dry run, in order."""
    return [name for name, _, _ in steps(0, True) + lessons(0, ROOT)] + [PROJECT_STEP]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.npu_dryrun", description=__doc__.splitlines()[0])
    parser.add_argument("device", nargs="?", default="0", help="logical NPU id 0..7 (default 0)")
    parser.add_argument("--out", default=str(ROOT / "npu_dryrun"), help="output folder (default npu_dryrun/)")
    parser.add_argument(
        "--chip", default=DEFAULT_CHIP, help=f"chip Name npu-smi lists (default {DEFAULT_CHIP}; e.g. 910B4-1, 310P3)"
    )
    parser.add_argument("--skip-ddp", action="store_true", help="leave out the 2-rank DDP step")
    parser.add_argument(
        "--steps",
        help="run only these steps, comma-separated (e.g. detect,02.build,02,03.build); "
        "the checks of steps left out fail",
    )
    args = parser.parse_args(argv)
    names = step_names()
    only = set(args.steps.split(",")) if args.steps else None
    if only is not None and not only <= set(names):
        print(
            f"Error: --steps {args.steps!r} names a step the dry run does not have — pick from {', '.join(names)}",
            file=sys.stderr,
        )
        return 2
    if not args.device.isdigit() or not 0 <= int(args.device) < 8:
        print(f"Error: device {args.device!r} is not a logical id of the stand-in machine — pass 0..7", file=sys.stderr)
        return 2
    if not CHIP.fullmatch(args.chip):
        print(f"Error: --chip {args.chip!r} is not a chip name as npu-smi prints it — e.g. 910B3", file=sys.stderr)
        return 2
    try:
        summary = run(int(args.device), Path(args.out), ddp=not args.skip_ddp, chip=args.chip, only=only)
    except Exception as err:  # noqa: BLE001  (a LabError from prepare_output_dir, a missing fixture)
        print(f"Error: the dry run could not start ({err}) — see the message and retry", file=sys.stderr)
        return 2
    results = expectations.evaluate(Path(summary["out"]), int(args.device))
    print(expectations.render(results))
    return 0 if all(r.ok for r in results) else 1
