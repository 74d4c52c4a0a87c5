"""The NPU dry run (tests/npu_dryrun) for logical device 3: every mode's NPU path against recording stand-ins.

What it proves: the lab finds CANN and the devices the documented way, builds the documented
command lines (msprof, msprof op, atc), calls pyACL / AscendCL / torch_npu in the documented
order on the device it was given, and reads, checks and reports the real-format files the
stand-ins replay; and that each Python lesson file, copied alone into a folder with nothing of the
lab beside it or on PYTHONPATH, runs there on that device with the profiler calls it teaches. What it does not prove: anything measured (the stand-ins replay captures of
other workloads, so workload checks in the reports fail by design), that the real tools accept
exactly what the stand-ins accept, or anything about the device itself; only an NPU run shows that.
The second half checks that the stand-ins refuse what the real tools refuse, so a pass above means
the lab's calls were accepted, not that anything would have been. The suite runs a slice of the dry
run (:data:`FULL_RUN_ONLY` says what it leaves out); ``nox -s npu_dryrun`` runs every step and check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from tests.npu_dryrun import driver, expectations

DEVICE = 3
# The suite runs a slice of the dry run (about 60 s of its 115 on the 2-core VM): every mode's main NPU path, each
# lesson copied alone and the C++ project. Left out, with the checks that need them, and run by `nox -s npu_dryrun`
# (every step, every check): variations of a step kept here (the same lesson on an older torch_npu, precision with
# other names, pyasc on the simulator) and the dynamic-profiling runs (about 20 s each, most of it the steps the
# lesson lets pass before collecting; tests/modes/test_dynamic_profile.py drives the stand-in's collection).
# The slice runs with $SOC_VERSION set, as a user's CANN environment may have it (a hyphenated Atlas A2 name): that
# the variable reaches every tool is checked below; the SoC read from npu-smi, in the other-SoC run further down.
SUITE_SOC = "Ascend910B4-1"
FULL_RUN_ONLY = {
    "pyasc_simulator": "02.pyasc_sim",
    "precision_dump_other_names": "precision.other_names",
    "dynamic_04": "04.dynamic",
    "dynamic_04_pta71": "04.dynamic_pta71",
    "older_torch_npu": "alone.01.pta60rc2",
}
DRYRUN = ROOT / "tests" / "npu_dryrun"
MODULES = DRYRUN / "modules"
TOOLS = DRYRUN / "tools.py"


@pytest.fixture(scope="module")
def dryrun(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("npu_dryrun") / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.npu_dryrun", str(DEVICE), "--out", str(out), "--steps", ",".join(suite_steps())],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SOC_VERSION": SUITE_SOC},
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 2: the dry run itself could not run
    assert (out / "calls.jsonl").is_file() and (out / "summary.json").is_file(), proc.stdout + proc.stderr
    return out


def test_soc_version_reaches_every_step(dryrun: Path) -> None:
    assert expectations.soc_of(dryrun) == SUITE_SOC
    atc = [c for c in expectations.load(dryrun) if c["tool"] == "atc" and c["call"] == "convert"]
    assert atc and all(f"--soc_version={SUITE_SOC}" in c["args"] for c in atc)


def suite_steps() -> list[str]:
    """Every step of the dry run but those :data:`FULL_RUN_ONLY` names."""
    return [name for name in driver.step_names() if name not in FULL_RUN_ONLY.values()]


def test_the_slice_leaves_out_steps_and_checks_the_full_run_has() -> None:
    assert set(FULL_RUN_ONLY) <= set(expectations.CHECKS) and set(FULL_RUN_ONLY.values()) <= set(driver.step_names())


@pytest.mark.parametrize("check", [c for c in expectations.CHECKS if c not in FULL_RUN_ONLY])
def test_documented_npu_behaviour(dryrun: Path, check: str) -> None:
    result = expectations.CHECKS[check](dryrun, DEVICE)
    assert result.ok, f"{result.name}: {result.detail}"


def test_every_call_is_one_json_object_with_tool_call_args_env(dryrun: Path) -> None:
    calls = expectations.load(dryrun)
    assert {c["tool"] for c in calls} >= {
        "msprof",
        "msprof op",
        "atc",
        "npu-smi",
        "cmake",
        "acl",
        "ascendcl",
        "torch_npu",
    }
    for c in calls:
        assert isinstance(c["call"], str) and isinstance(c["args"], list) and isinstance(c["env"], dict), c


def test_the_modes_ran_in_a_private_copy_of_the_lab(dryrun: Path) -> None:
    """Builds, models and prof_out/ folders of the dry run stay in its own folder, never in the working tree."""
    lab = json.loads((dryrun / "summary.json").read_text())["lab"]
    outputs = [
        a.split("=", 1)[1]
        for c in expectations.load(dryrun)
        if c["tool"] in ("msprof", "msprof op", "atc")
        for a in c["args"]
        if a.startswith(("--output=", "--om=", "--json="))
    ]
    assert outputs and all(Path(o).resolve().is_relative_to(Path(lab).resolve()) for o in outputs), outputs


# ----- another SoC, read from npu-smi: one outside Atlas A2/A3 -------------------------------------------
SOC_STEPS = "detect,02.build,02,03.build"  # the steps whose behaviour depends on the SoC
SOC_CHECKS = ("detection", "select_02", "msprof_op", "atc_variants", "no_refusals")


@pytest.mark.parametrize(
    "args, env, soc",
    [
        (
            ["--chip", "310P3"],
            {},
            "Ascend310P3",
        )  # npu-smi lists 310P3 chips: no KernelScale, no region, mode 02 refuses
    ],
    ids=["chip 310P3"],
)
def test_dry_run_on_other_socs(tmp_path: Path, args: list[str], env: dict[str, str], soc: str) -> None:
    out = tmp_path / "out"
    base = {k: v for k, v in os.environ.items() if k != "SOC_VERSION"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.npu_dryrun",
            str(DEVICE),
            "--out",
            str(out),
            "--skip-ddp",
            "--steps",
            SOC_STEPS,
            *args,
        ],
        cwd=ROOT,
        env={**base, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert expectations.soc_of(out) == soc
    for check in SOC_CHECKS:
        result = expectations.CHECKS[check](out, DEVICE)
        assert result.ok, f"{result.name}: {result.detail}"
    atc = [c for c in expectations.load(out) if c["tool"] == "atc" and c["call"] == "convert"]
    assert atc and all(f"--soc_version={soc}" in c["args"] for c in atc)


# ----- the stand-ins refuse what the real tools refuse ------------------------------------------------
def stand_in_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_RT_VISIBLE_DEVICES"}
    env.update(
        PYTHONPATH=str(MODULES),
        NPU_DRYRUN_LOG=str(tmp_path / "calls.jsonl"),
        NPU_DRYRUN_CAPTURES=str(DRYRUN / "captures"),
        NPU_DRYRUN_FIXTURES=str(ROOT / "tests/fixtures/npu"),
    )
    env.update(extra)
    return env


def tool(tmp_path: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOOLS), *argv],
        env=stand_in_env(tmp_path, **extra),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def refusals(tmp_path: Path) -> list[str]:
    return [c.get("refused") for c in expectations.load(tmp_path) if c.get("refused")]


@pytest.mark.parametrize(
    "argv",
    [
        ["msprof", "--output=o", "--bogus=on", "true"],  # an option msprof does not have
        ["msprof", "--output", "o", "true"],  # msprof takes --name=value only
        ["msprof", "--output=o", "--aic-metrics=PipelineExecuteUtilization", "true"],  # 310B only
        ["msprof", "--output=o", "--ascendcl=on"],  # no program
        ["msprof", "--export=on", "--output=nowhere"],  # nothing collected there
        ["msprof", "op", "--output=o", "--aic-metrics=Kernelscale", "true"],  # metric names are case-sensitive
        ["msprof", "op", "--output=o", "--launch-count=0", "true"],  # 1..5000
        ["msprof", "op", "--output=o", "--launch-skip-before-match=1001", "true"],  # 0..1000
        ["atc", "--model=m.onnx", "--framework=5", "--output=m", "--soc_version=Ascend910B3", "--precision_mode=fp32"],
        [
            "atc",
            "--model=m.onnx",
            "--framework=5",
            "--output=m",
            "--soc_version=Ascend910B3",
            "--precision_mode=force_fp16",
            "--precision_mode_v2=origin",
        ],  # not together
        ["atc", "--mode=1", "--om=missing.om", "--json=m.json"],
        ["npu-smi", "info", "-t", "board"],
        ["msaccucmp", "convert", "-d", ".", "-out", "."],  # no dump file in the folder (-d is not recursive)
        ["msaccucmp", "convert", "-d", ".", "-t", "txt"],  # npy, msnpy, bin or pt
    ],
    ids=lambda argv: " ".join(argv[:3]),
)
def test_tool_stand_ins_refuse_what_the_tools_refuse(tmp_path: Path, argv: list[str]) -> None:
    proc = tool(tmp_path, *argv)
    assert proc.returncode != 0 and proc.stderr.startswith("[ERROR]"), proc.stdout + proc.stderr
    assert len(refusals(tmp_path)) == 1


SET_PLATFORM = """
import sys
from asc.runtime import config
soc = config.Platform(sys.argv[1]) if sys.argv[2] == "member" else sys.argv[1]
config.set_platform(config.Backend.Model, soc)
"""


@pytest.mark.parametrize(
    "soc, member, lib, refused",
    [
        ("Ascend910B1", "string", True, "soc_version is not a Platform member"),  # pyasc reads soc_version.value
        ("Ascend910B1", "member", False, "not on LD_LIBRARY_PATH"),  # the Model backend loads the simulator's libraries
        ("Ascend910B1", "member", True, None),
    ],
    ids=["a string SoC", "no simulator lib on LD_LIBRARY_PATH", "a Platform member, the lib on the path"],
)
def test_asc_stand_in_takes_a_platform_member_and_the_simulators_libraries(
    tmp_path: Path, soc: str, member: str, lib: bool, refused: str | None
) -> None:
    cann = tmp_path / "cann"
    env = stand_in_env(
        tmp_path,
        ASCEND_HOME_PATH=str(cann),
        NPU_DRYRUN_PYASC_TWIN=str(ROOT / "common" / "modes" / "ascendc" / "pyasc_twin" / "site" / "asc"),
        LD_LIBRARY_PATH=str(cann / "tools" / "simulator" / soc / "lib") if lib else "",
    )
    proc = subprocess.run(
        [sys.executable, "-c", SET_PLATFORM, soc, member],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode == 0) == (refused is None), proc.stderr
    assert [r for r in refusals(tmp_path) if refused and refused in r] or (refused is None and not refusals(tmp_path))


LAUNCHES = """
import sys, npu_dryrun_record as rec
for kernel in sys.argv[1:]:  # what ACLRT_LAUNCH_KERNEL records in the AscendCL stand-in: name, block dim, device
    rec.record("ascendcl", "launch", [kernel, 8, 0], rc=0)
"""


@pytest.mark.parametrize("skip, collected", [("0", 1), ("1", 1), ("2", 0)])
def test_msprof_op_stand_in_skips_launches_before_it_matches_the_kernel_name(
    tmp_path: Path, skip: str, collected: int
) -> None:
    # msOpProf: the skip counter counts every launch, matching --kernel-name or not, then the name is matched.
    # Launches: other_kernel, add_custom, other_kernel. Skipping 1 leaves add_custom; skipping 2 leaves none.
    proc = tool(
        tmp_path,
        "msprof",
        "op",
        f"--output={tmp_path / 'o'}",
        "--kernel-name=add_custom",
        f"--launch-skip-before-match={skip}",
        "--launch-count=5",
        sys.executable,
        "-c",
        LAUNCHES,
        "other_kernel",
        "add_custom",
        "other_kernel",
    )
    assert proc.returncode == 0, proc.stderr
    (done,) = [c for c in expectations.load(tmp_path) if c["call"] == "collect.done"]
    assert done["launches"] == collected
    assert len(list((tmp_path / "o").glob("OPPROF_*"))) == collected


def test_npu_smi_stand_in_lists_eight_910b3_chips_in_the_real_formats(tmp_path: Path) -> None:
    listing = tool(tmp_path, "npu-smi", "info", "-l").stdout
    assert "Total Count                    : 8" in listing and listing.count("NPU ID") == 8
    table = tool(tmp_path, "npu-smi", "info").stdout
    assert table.count(" 910B3 ") == 8  # one "| <id>     910B3   | OK ..." row per chip
    assert "| NPU   Name                | Health        |" in table


PYACL = """
import json, sys, acl
out = {}
out["set_device_before_init"] = acl.rt.set_device(0)
out["init"] = acl.init()
out["prof_start_before_init"] = acl.prof.start(1)
out["set_device_8"] = acl.rt.set_device(8)
out["set_device_3"] = acl.rt.set_device(3)
out["load"] = acl.mdl.load_from_file(sys.argv[1])[1]
out["prof_init_after_load"] = acl.prof.init(sys.argv[2])
print(json.dumps(out))
"""


def test_pyacl_stand_in_enforces_the_documented_order_and_device_ids(tmp_path: Path) -> None:
    om = tmp_path / "m.om"
    om.write_text(json.dumps({"magic": "NPU_DRYRUN_OM", "name": "m", "inputs": [], "outputs": [], "ops": []}))
    proc = subprocess.run(
        [sys.executable, "-c", PYACL, str(om), str(tmp_path)],
        env=stand_in_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    got = json.loads(proc.stdout)
    assert got == {
        "set_device_before_init": 100001,
        "init": 0,
        "prof_start_before_init": 500005,
        "set_device_8": 107001,
        "set_device_3": 0,
        "load": 0,
        "prof_init_after_load": 500005,
    }


PYACL_TEARDOWN = """
import acl, sys
acl.init(); acl.rt.set_device(0); acl.prof.init(sys.argv[1])
print(acl.rt.reset_device(0), acl.prof.finalize(), acl.finalize())
"""


def test_pyacl_stand_in_refuses_prof_finalize_after_the_device_is_reset(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PYACL_TEARDOWN, str(tmp_path)],
        env=stand_in_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.stdout.split() == ["0", "500005", "500005"], proc.stderr  # finalize: profiling is still initialized
    assert refusals(tmp_path)[0].startswith("acl.prof.finalize must come before the runtime resources are released")


PYACL_DUMP = """
import json, sys, acl
print(acl.init(sys.argv[1]))
"""


@pytest.mark.parametrize(
    "dump, rc",
    [
        ({"dump_path": "{tmp}", "dump_list": [{"model_name": "m"}], "dump_mode": "output"}, 0),
        ({"dump_path": "{tmp}/missing", "dump_list": [{"model_name": "m"}]}, 100000),  # dump_path must exist
        ({"dump_path": "{tmp}", "dump_list": [{"layer": ["x"]}]}, 100000),  # every entry names its model
        ({"dump_path": "{tmp}", "dump_list": [{"model_name": "m"}], "dump_mode": "outputs"}, 100000),
    ],
    ids=["documented", "missing dump_path", "no model_name", "bad dump_mode"],
)
def test_pyacl_stand_in_checks_the_dump_block_of_acl_init(tmp_path: Path, dump: dict, rc: int) -> None:
    config = tmp_path / "acl.json"
    config.write_text(
        json.dumps(
            {"dump": {k: v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for k, v in dump.items()}}
        )
    )
    proc = subprocess.run(
        [sys.executable, "-c", PYACL_DUMP, str(config)],
        env=stand_in_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.stdout.split() == [str(rc)], proc.stderr
    assert len(refusals(tmp_path)) == (rc != 0)


def test_pyacl_stand_in_numbers_devices_under_ascend_rt_visible_devices(tmp_path: Path) -> None:
    code = "import acl; acl.init(); print(acl.rt.set_device(3), acl.rt.set_device(0))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=stand_in_env(tmp_path, ASCEND_RT_VISIBLE_DEVICES="3"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.stdout.split() == ["107001", "0"]  # one visible card: it is logical device 0


TORCH_NPU = """
import torch, torch_npu
for bad in (lambda: torch.npu.set_device(8), lambda: torch.ones(1).to("npu:8"),
            lambda: torch_npu.profiler.profile(unknown=1), lambda: torch_npu.profiler.profile().step(),
            lambda: torch_npu.npu.mstx.range_end(99)):
    try:
        bad()
        print("accepted")
    except (RuntimeError, TypeError) as err:
        print(type(err).__name__)
torch.npu.set_device(3)
print(torch.ones(2).to("npu:3").device, torch.npu.current_device())
rid = torch_npu.npu.mstx.range_start("forward", torch.npu.current_stream())
torch_npu.npu.mstx.range_end(rid)
print(rid)
"""


def test_torch_npu_stand_in_refuses_bad_devices_and_arguments(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", TORCH_NPU],
        env=stand_in_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.stdout.splitlines() == [
        "RuntimeError",
        "RuntimeError",
        "TypeError",
        "RuntimeError",
        "RuntimeError",
        "cpu 3",
        "1",
    ], proc.stderr


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="needs a C++ compiler")
def test_ascendcl_stand_in_refuses_a_device_id_past_the_last(tmp_path: Path) -> None:
    cxx = shutil.which("g++") or shutil.which("clang++")
    exe = tmp_path / "add_custom_main"
    src, twin = ROOT / "02_api_AscendC" / "src", ROOT / "common" / "modes" / "ascendc" / "twin"
    subprocess.run(
        [
            cxx,
            "-std=c++17",
            "-DLAB_RUN_NPU",
            "-I",
            str(ROOT / "tests/native/acl_stub"),
            "-I",
            str(twin),
            str(src / "main.cpp"),
            str(DRYRUN / "native" / "acl_dryrun.cpp"),
            "-o",
            str(exe),
        ],
        check=True,
    )
    proc = subprocess.run(
        [str(exe), "--device", "8", "--launches", "1"],
        env=stand_in_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1 and "107001" in proc.stderr
    calls = [(c["call"], c["args"], c["rc"]) for c in expectations.load(tmp_path)]
    assert ("aclrtSetDevice", [8], 107001) in calls


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="needs a C++ compiler")
@pytest.mark.parametrize(
    "default, given, rc", [(True, [], 0), (False, [], 2), (False, ["-DCMAKE_BUILD_TYPE=Release"], 0)]
)
def test_cmake_stand_in_fails_like_canns_kernel_scripts_without_a_build_type(
    tmp_path: Path, default: bool, given: list[str], rc: int
) -> None:
    """The copied project builds only when a build type reaches CANN's kernel scripts: its CMakeLists.txt's default
    (the lab's sets Release) or one on the command line; with neither the stand-in's build stops as they do."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("CMakeLists.txt", "add_kernel.cpp", "main.cpp"):  # the copied project: its three files
        shutil.copy2(ROOT / "02_api_AscendC" / "src" / name, project)
    if not default:
        text = (project / "CMakeLists.txt").read_text()
        (project / "CMakeLists.txt").write_text(text.replace("if(NOT CMAKE_BUILD_TYPE)", "if(FALSE)"))
    cann = tmp_path / "cann" / "compiler" / "tikcpp" / "ascendc_kernel_cmake"
    cann.mkdir(parents=True)
    (cann / "ascendc.cmake").write_text("")
    configure = tool(
        tmp_path,
        "cmake",
        "-S",
        str(project),
        "-B",
        str(project / "build"),
        "-DRUN_MODE=npu",
        "-DSOC_VERSION=Ascend910B3",
        f"-DASCEND_CANN_PACKAGE_PATH={tmp_path / 'cann'}",
        *given,
    )
    assert configure.returncode == 0, configure.stderr
    build = tool(tmp_path, "cmake", "--build", str(project / "build"))
    assert build.returncode == rc, build.stderr
    assert ("no build type" in build.stderr) == (rc != 0)
