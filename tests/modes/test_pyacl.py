"""03_api_pyAcl: the portable path end to end (TinyMLP and other workloads), the variants, the argv builders,
the pyACL cleanup."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, copy_lab, error_lines, lab_env, load_lesson

MODE = ROOT / "03_api_pyAcl"
lesson = load_lesson("03_api_pyAcl/src/infer.py")  # the lesson: the pyACL chain, driven here against a fake acl

from common.analyze.checks import variants as variant_checks
from common.backend import Backend
from common.collect import npu_commands
from common.errors import LabError
from common.formats import readers, schema
from common.formats.table import read_table
from common.formats import ort_profile as ort_format
from common.analyze import graph_changes
from common.modes.pyacl import acl_worker, build_model, variants
from common.modes.pyacl import run as infer  # the harness: tolerances, the variants' runs, the npu argv
from common.workload import load_workload, tiny_mlp

VARIANT_NAMES = list(variants.VARIANTS)
TINY = variants.ModelFiles(tiny_mlp())


# ----- shared set-up ---------------------------------------------------------------------------------
def sh(repo: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    """Run one of the mode's shell scripts from an unrelated directory, as a user would."""
    return subprocess.run(
        ["bash", str(repo / MODE.name / script), *args],
        cwd=repo.parent,
        check=False,
        env=lab_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def prof_files(repo: Path, variant: str, name: str) -> list[Path]:
    return sorted((repo / MODE.name / "prof_out" / variant).glob(f"PROF_*/mindstudio_profiler_output/{name}_*.*"))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    repo = copy_lab(tmp_path_factory.mktemp("pyacl") / "lab")
    result = sh(repo, "build_model.sh")
    assert result.returncode == 0, result.stderr
    for name in VARIANT_NAMES:
        assert f"[{name}]" in result.stdout
    return repo


@pytest.fixture(scope="module")
def ran(built: Path) -> tuple[Path, subprocess.CompletedProcess]:
    result = sh(built, "run.sh", "0")
    return built, result


# ----- the portable path, end to end ---------------------------------------------------------------
def test_run_passes_and_reports_every_variant(ran):
    repo, result = ran
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("=== msprof lab backend: PORTABLE")
    verdicts = [line for line in lines if line.startswith(("[PASS]", "[FAIL]"))]
    assert verdicts and all(v.startswith("[PASS]") for v in verdicts)
    for name in VARIANT_NAMES:
        assert any(line.startswith(name + " ") for line in lines), f"no table row for {name}"
    info = json.loads((repo / MODE.name / "prof_out" / "run_info.json").read_text())
    assert info["completed"] is True and info["backend"] == "portable" and info["exit_code"] == 0
    assert set(info["results"]) == set(VARIANT_NAMES)
    page = (repo / MODE.name / "prof_out" / "report.html").read_text()  # written once run_info.json says so
    assert "| complete" in page and "INCOMPLETE" not in page


def test_report_rebuilds_03s_own_report_beside_the_data_or_into_out(ran, tmp_path):
    """03 renders its own report text (the variant table): report keeps it, with the checks 03 recorded, and a
    page drawn from the data, also when --out puts the files elsewhere."""
    repo, _ = ran
    folder = repo / MODE.name / "prof_out"
    own = (folder / "report.md").read_text()
    out = tmp_path / "elsewhere"
    proc = subprocess.run(
        [sys.executable, "-m", "common", "report", str(folder), "--out", str(out)],
        cwd=repo,
        env=lab_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rebuilt = (out / "report.md").read_text()
    assert [li for li in rebuilt.splitlines() if li.startswith("[")] == [
        li for li in own.splitlines() if li.startswith("[")
    ]
    assert "default" in rebuilt and "fp16-io" in rebuilt  # the variant table 03 recorded
    assert 'data-chart="op-share"' in (out / "report.html").read_text()  # drawn from the data, not from --out


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_files_have_msprof_columns_and_portable_values(ran, variant):
    repo, _ = ran
    (summary,), (statistic,) = prof_files(repo, variant, "op_summary"), prof_files(repo, variant, "op_statistic")
    table = read_table(summary, schema.OP_SUMMARY, "test")
    assert table.header == schema.OP_SUMMARY
    assert read_table(statistic, schema.OP_STATISTIC, "test").header == schema.OP_STATISTIC
    tasks = readers.read_op_summary(summary)
    assert {t.task_type for t in tasks} == {"CPU"} and {t.device_id for t in tasks} == {"host"}
    assert all(t.input_dtypes and t.output_dtypes for t in tasks), "dtypes come from the profile"
    gemm = [t for t in tasks if t.op_type == "Gemm"]
    assert gemm and all(t.input_shapes.startswith("32,1024") for t in gemm)
    assert all(v is None for t in tasks for v in t.pmu.values()), "no PMU on a CPU: N/A"
    stats = readers.read_op_statistic(statistic)
    assert sum(s.count for s in stats) == len(tasks)
    assert prof_files(repo, variant, "msprof"), "timeline json"


def graph_counts(repo: Path, variant: str, stem: str = "tiny_mlp") -> Counter:
    import onnx

    path = repo / MODE.name / "model" / "portable" / f"{stem}_{variant}.opt.onnx"
    return build_model.onnx_types(onnx.load(str(path)))


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_counts_per_execute_follow_the_builtonnx_graph(ran, variant):
    repo, _ = ran
    (summary,) = prof_files(repo, variant, "op_summary")
    measured = Counter(t.op_type for t in readers.read_op_summary(summary))
    graph = graph_counts(repo, variant)
    assert {k: v / infer.MEASURED for k, v in measured.items()} == dict(graph)


def test_cast_lesson_across_variants(ran):
    repo, _ = ran
    default, fp16_io, fp32 = (graph_counts(repo, v) for v in ("default", "fp16-io", "fp32"))
    assert default["Cast"] > 0 and fp16_io["Cast"] > 0
    assert fp32["Cast"] == 0 and fp32["Gemm"] == 4 and fp32["Erf"] == 3  # the dynamo order of GELU: not fused
    info = json.loads((repo / MODE.name / "prof_out" / "run_info.json").read_text())["results"]
    # The fp16 policy must really change the numbers, and stay inside the stated tolerance.
    assert info["fp32"]["accuracy"]["max_abs_diff"] < info["default"]["accuracy"]["max_abs_diff"]
    for name in ("default", "fp16-io"):
        assert info[name]["accuracy"]["cosine"] >= variant_checks.COSINE_MIN
        assert info[name]["cast_share"] > 0
    assert info["fp32"]["cast_share"] == 0


def test_warmup_runs_are_recorded_but_excluded(ran):
    repo, _ = ran
    raw = json.loads((repo / MODE.name / "prof_out" / "fp32" / "onnxruntime_profile.json").read_text())
    runs = [e for e in raw if e.get("name") == "model_run"]
    kernels = [e for e in raw if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    per_execute = sum(graph_counts(repo, "fp32").values())
    assert len(runs) == infer.WARMUP + infer.MEASURED
    assert len(kernels) == len(runs) * per_execute
    (summary,) = prof_files(repo, "fp32", "op_summary")
    assert len(readers.read_op_summary(summary)) == infer.MEASURED * per_execute


def test_measured_events_filters_by_run_not_by_count():
    runs = [{"name": "model_run", "ph": "X", "ts": 100 * i, "dur": 50} for i in range(5)]
    # Run 0 has an extra kernel (a one-off at first run), so cutting by count would go wrong.
    nodes = [
        {"cat": "Node", "name": f"n{i}_{j}_kernel_time", "ts": 100 * i + 10 + j, "dur": 1}
        for i in range(5)
        for j in range(3 if i == 0 else 2)
    ]
    stray = {"cat": "Node", "name": "init_kernel_time", "ts": 470, "dur": 1}  # outside every run
    path_events = runs + nodes + [stray]
    profile = ort_format.Profile(
        [ort_format.Run(i, float(r["ts"]), float(r["ts"] + r["dur"])) for i, r in enumerate(runs)],
        [e for e in path_events if e.get("cat") == "Node"],
    )
    kept = ort_format.measured_events(profile, warmup=2, measured=3)
    assert sorted(e["name"] for e in kept) == sorted(f"n{i}_{j}_kernel_time" for i in (2, 3, 4) for j in range(2))
    with pytest.raises(LabError, match="5 runs"):
        ort_format.measured_events(profile, warmup=3, measured=20)


# ----- bad input: one Error line, exit 2, nothing deleted --------------------------------------------
def assert_usage_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    errors = error_lines(result.stderr)
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in errors[0]


@pytest.mark.parametrize(
    "script,args,needle",
    [
        ("run.sh", ["0", "fp8"], "unknown variant 'fp8'"),
        ("build_model.sh", ["fp8"], "unknown variant 'fp8'"),
        ("run.sh", ["x1"], "device id 'x1'"),
        ("run.sh", ["64"], "device id '64'"),
    ],
)
def test_usage_errors(tmp_path, script, args, needle):
    assert_usage_error(sh(copy_lab(tmp_path / "lab"), script, *args), needle)


def test_missing_model_points_to_build(tmp_path):
    assert_usage_error(sh(copy_lab(tmp_path / "lab"), "run.sh", "0", "fp32"), "not found", "build_model.sh")


@pytest.fixture
def bad_model_repo(built, tmp_path) -> Path:
    """A repo whose fp32 model will be damaged, with a previous prof_out that must survive."""
    repo = copy_lab(tmp_path / "lab")
    shutil.copytree(built / MODE.name / "model", repo / MODE.name / "model")
    previous = repo / MODE.name / "prof_out"
    previous.mkdir()
    (previous / ".msprof_lab").write_text("marker")
    (previous / "earlier.txt").write_text("from an earlier run")
    return repo


def test_corrupt_model_file(bad_model_repo):
    (bad_model_repo / MODE.name / "model" / "portable" / "tiny_mlp_fp32.opt.onnx").write_bytes(b"\x08\x07not a model")
    assert_usage_error(sh(bad_model_repo, "run.sh", "0", "fp32"), "not a valid ONNX model")
    assert (bad_model_repo / MODE.name / "prof_out" / "earlier.txt").is_file()


def test_wrong_shape_model_file(bad_model_repo):
    import onnx
    import torch

    path = bad_model_repo / MODE.name / "model" / "portable" / "tiny_mlp_fp32.opt.onnx"
    torch.onnx.export(
        tiny_mlp().build_model(), (torch.zeros(16, 1024),), str(path), input_names=["x"], opset_version=17, dynamo=False
    )
    assert onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim[0].dim_value == 16
    assert_usage_error(sh(bad_model_repo, "run.sh", "0", "fp32"), "takes x[16, 1024]", "feeds x[32, 1024]")
    assert (bad_model_repo / MODE.name / "prof_out" / "earlier.txt").is_file()


def test_wrong_input_shape_is_refused():
    feed = np.zeros((16, 1024), np.float32)
    with pytest.raises(LabError, match=r"float32\[32, 1024\].*float32\[16, 1024\]"):
        variants.check_feed(feed, [32, 1024], "float32", "model input x")
    with pytest.raises(LabError, match="float16"):
        variants.check_feed(np.zeros((32, 1024), np.float32), [32, 1024], "float16", "model input x")


# ----- argv builders ---------------------------------------------------------------------------------
def test_atc_argv_exact():
    argv = npu_commands.atc_argv(
        "/cann/bin/atc",
        Path("/m/tiny mlp.onnx"),
        Path("/m/out"),
        "Ascend910B3",
        "x:32,1024",
        variants.VARIANTS["fp16-io"].atc_options(["x"]),
    )
    assert argv == [
        "/cann/bin/atc",
        "--model=/m/tiny mlp.onnx",
        "--framework=5",
        "--output=/m/out",
        "--soc_version=Ascend910B3",
        "--input_shape=x:32,1024",
        "--input_fp16_nodes=x",
        "--output_type=FP16",
    ]
    assert (
        npu_commands.atc_argv(
            "atc", Path("a.onnx"), Path("o"), "Ascend310P3", "x:32,1024", variants.VARIANTS["fp32"].atc_options(["x"])
        )[-1]
        == "--precision_mode=must_keep_origin_dtype"  # force_fp32 casts MatMul inputs to fp16 (cube_fp16in_fp32out)
    )
    assert variants.VARIANTS["default"].atc_options(["x"]) == ()
    # Several inputs: ATC separates the fp16 nodes with ';'; an integer input (token ids) stays out.
    assert variants.VARIANTS["fp16-io"].atc_options(["a", "b"]) == ("--input_fp16_nodes=a;b", "--output_type=FP16")
    with pytest.raises(ValueError):
        npu_commands.atc_argv("atc", Path("a.onnx"), Path("o"), "910B3", "x:32,1024")
    assert npu_commands.atc_om_to_json_argv("atc", Path("/m/a.om"), Path("/m/a.json")) == [
        "atc",
        "--mode=1",
        "--om=/m/a.om",
        "--json=/m/a.json",
    ]


def fake_npu(devices=(0, 3)) -> Backend:
    return Backend("npu", "test", "/cann", {"msprof": "/cann/bin/msprof", "atc": "/cann/bin/atc"}, devices)


def test_build_npu_runs_atc_with_the_detected_soc(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setenv("SOC_VERSION", "Ascend910B4")  # the detection path soc_version reads first
    monkeypatch.setattr(variants.ModelFiles, "om_stem", lambda self, v: tmp_path / f"tiny_mlp_{v.name}")
    monkeypatch.setattr(variants.ModelFiles, "onnx", property(lambda self: Path("/m/tiny_mlp.onnx")))
    monkeypatch.setattr(
        build_model.subprocess, "run", lambda argv, check: calls.append(argv) or subprocess.CompletedProcess(argv, 0)
    )
    build_model.build_npu(variants.VARIANTS["fp32"], TINY, fake_npu())
    assert json.loads((tmp_path / "tiny_mlp_fp32.workload.json").read_text())["sha256"] == tiny_mlp().sha256
    assert calls == [
        [
            "/cann/bin/atc",
            "--model=/m/tiny_mlp.onnx",
            "--framework=5",
            f"--output={tmp_path}/tiny_mlp_fp32",
            "--soc_version=Ascend910B4",
            "--input_shape=x:32,1024",
            "--precision_mode=must_keep_origin_dtype",
        ],
        ["/cann/bin/atc", "--mode=1", f"--om={tmp_path}/tiny_mlp_fp32.om", f"--json={tmp_path}/tiny_mlp_fp32.json"],
    ]


def test_build_npu_reads_the_soc_of_the_device_it_is_given(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(build_model, "soc_version", lambda backend, device: seen.append(device) or "Ascend910B4-1")
    monkeypatch.setattr(variants.ModelFiles, "om_stem", lambda self, v: tmp_path / f"tiny_mlp_{v.name}")
    monkeypatch.setattr(
        build_model.subprocess, "run", lambda argv, check: seen.append(argv) or subprocess.CompletedProcess(argv, 0)
    )
    build_model.build_npu(variants.VARIANTS["default"], TINY, fake_npu(), 3)
    assert seen[0] == 3 and "--soc_version=Ascend910B4-1" in seen[1]


@pytest.mark.parametrize("acl_prof", [False, True])
def test_profile_npu_argv(monkeypatch, tmp_path, acl_prof):
    calls = []
    monkeypatch.setattr(
        acl_worker.launcher,
        "run_command",
        lambda argv, env, stderr_log=None: calls.append((argv, env)) or acl_worker.launcher.AppRun(0),
    )
    (tmp_path / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP").mkdir()
    with pytest.raises(LabError, match="no op_summary"):
        infer.profile_npu(variants.VARIANTS["default"], TINY, tmp_path, fake_npu(), 3, acl_prof)
    worker = [
        sys.executable,
        str(MODE / "src" / "infer.py"),  # the lesson itself
        "--om",
        str(TINY.om_path(variants.VARIANTS["default"])),
        "--device",
        "3",  # the lesson selects logical device 3 itself (acl.rt.set_device)
        "--inputs",
        str(tmp_path / "inputs.npz"),  # the arrays fed, one per model input, in the variant's dtype
        "--save-output",
        str(tmp_path / "output.npy"),
        "--warmup",
        "3",
        "--measured",
        "20",
    ]
    if acl_prof:
        assert [c[0] for c in calls] == [
            [*worker, "--out", str(tmp_path)],  # acl.prof writes its PROF_* there
            ["/cann/bin/msprof", "--export=on", f"--output={tmp_path}/PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP"],
        ]
    else:
        assert [c[0] for c in calls] == [
            ["/cann/bin/msprof", f"--output={tmp_path}", *npu_commands.MSPROF_SWITCHES, *worker, "--no-acl-prof"]
        ]
    # Not supported while profiling (CANN's ASCEND_RT_VISIBLE_DEVICES page): the environment selects no card.
    assert all("ASCEND_RT_VISIBLE_DEVICES" not in c[1] for c in calls)


# ----- the pyACL chain against a recording fake acl ---------------------------------------------------
class FakeAcl:
    """Records every call; call number ``fail_at`` (counting acquisitions and queries) fails."""

    ERROR = 507011
    NEVER_FAIL = frozenset({"util.bytes_to_ptr", "util.ptr_to_bytes"})  # pure conversions, no return code

    RELEASES = {  # release call -> the acquisition it undoes
        "finalize": "init",
        "rt.reset_device": "rt.set_device",
        "rt.destroy_context": "rt.create_context",
        "mdl.unload": "mdl.load_from_file",
        "mdl.destroy_desc": "mdl.create_desc",
        "rt.free": "rt.malloc",
        "destroy_data_buffer": "create_data_buffer",
        "mdl.destroy_dataset": "mdl.create_dataset",
        "rt.free_host": "rt.malloc_host",
        "prof.finalize": "prof.init",
        "prof.destroy_config": "prof.create_config",
        "prof.stop": "prof.start",
    }

    def __init__(
        self,
        nbytes: int | list[int],
        fail_at: int | None = None,
        fail_release: str | None = None,
        outputs: list[tuple[tuple[int, ...], int]] | None = None,
    ):
        # The model's inputs by size in bytes (one int: one input).
        self.nbytes = [nbytes] if isinstance(nbytes, int) else list(nbytes)
        self.fail_at, self.fail_release = fail_at, fail_release
        # The model's outputs as its description states them: (dims, aclDataType); default one fp32 [32, 1024].
        self.outputs = outputs if outputs is not None else [((32, 1024), 0)]
        self.calls: list[str] = []
        self.live: list[tuple[str, object]] = []  # acquired and not yet released, in order
        self.released: list[tuple[str, object]] = []
        self.memory: dict[int, bytes] = {}
        self._next = 100
        self._count = 0
        for space in ("rt", "mdl", "util", "prof"):
            setattr(self, space, _Space(self, space))

    def handle(self) -> int:
        self._next += 1
        return self._next

    def call(self, name: str, *args):
        self.calls.append(name)
        if name in self.RELEASES:
            kind = self.RELEASES[name]
            key = (kind, args[0] if args else None)
            assert key in self.live, f"{name}{args} releases something never acquired"
            self.live.remove(key)
            self.released.append(key)
            return self.ERROR if name == self.fail_release else 0
        failing = False
        if name not in self.NEVER_FAIL:
            failing = self._count == self.fail_at
            self._count += 1
        return getattr(self, "_" + name.replace(".", "_"))(failing, *args)

    def _acquire(self, kind, failing, key_arg=None, pair=True):
        if failing:
            return (0, self.ERROR) if pair else (None if kind != "init" else self.ERROR)
        handle = key_arg if key_arg is not None else self.handle()
        self.live.append((kind, handle))
        return (handle, 0) if pair else handle

    def _init(self, failing):
        if failing:
            return self.ERROR
        self.live.append(("init", None))
        return 0

    def _rt_set_device(self, failing, device):
        if failing:
            return self.ERROR
        self.live.append(("rt.set_device", device))
        return 0

    def _rt_create_context(self, failing, device):
        return self._acquire("rt.create_context", failing)

    def _mdl_load_from_file(self, failing, path):
        return self._acquire("mdl.load_from_file", failing)

    def _mdl_create_desc(self, failing):
        return self._acquire("mdl.create_desc", failing, pair=False)

    def _mdl_get_desc(self, failing, desc, model_id):
        return self.ERROR if failing else 0

    def _mdl_get_num_inputs(self, failing, desc):
        return 0 if failing else len(self.nbytes)

    def _mdl_get_input_size_by_index(self, failing, desc, i):
        return 0 if failing else self.nbytes[i]

    def _mdl_get_num_outputs(self, failing, desc):
        return 0 if failing else len(self.outputs)

    def _mdl_get_output_size_by_index(self, failing, desc, i):
        dims, code = self.outputs[i]
        return 0 if failing else int(np.prod(dims)) * np.dtype(lesson.ACL_DTYPES.get(code, np.float32)).itemsize

    def _mdl_get_output_dims(self, failing, desc, i):
        dims, _ = self.outputs[i]
        return ({}, self.ERROR) if failing else ({"name": f"y{i}", "dimCount": len(dims), "dims": list(dims)}, 0)

    def _mdl_get_output_data_type(self, failing, desc, i):
        return -1 if failing else self.outputs[i][1]  # -1: ACL_DT_UNDEFINED

    def _rt_malloc(self, failing, size, policy):
        return self._acquire("rt.malloc", failing)

    def _rt_malloc_host(self, failing, size):
        return self._acquire("rt.malloc_host", failing)

    def _create_data_buffer(self, failing, ptr, size):
        return self._acquire("create_data_buffer", failing, pair=False)

    def _mdl_create_dataset(self, failing):
        return self._acquire("mdl.create_dataset", failing, pair=False)

    def _mdl_add_dataset_buffer(self, failing, dataset, buffer):
        self.buffers = getattr(self, "buffers", {})
        self.buffers.setdefault(dataset, buffer)
        return (None, self.ERROR) if failing else (dataset, 0)

    def _util_bytes_to_ptr(self, failing, data):
        ptr = self.handle()
        self.memory[ptr] = data
        return ptr

    def _rt_memcpy(self, failing, dst, dst_size, src, count, kind):
        if failing:
            return self.ERROR
        self.memory[dst] = self.memory.get(src, b"")[:count]
        return 0

    def _mdl_execute(self, failing, model_id, inputs, outputs):
        if failing:
            return self.ERROR
        self.executes = getattr(self, "executes", 0) + 1
        # The fake model: output k is the inputs' bytes one after the other, cut or repeated to output k's size.
        ptrs = [h for k, h in self.live if k == "rt.malloc"]
        in_ptrs, out_ptrs = ptrs[: len(self.nbytes)], ptrs[len(self.nbytes) :]
        data = b"".join(self.memory.get(p, b"") for p in in_ptrs)
        for ptr, (dims, code) in zip(out_ptrs, self.outputs):
            size = int(np.prod(dims)) * np.dtype(lesson.ACL_DTYPES[code]).itemsize
            self.memory[ptr] = (data * (size // max(len(data), 1) + 1))[:size]
        return 0

    def _util_ptr_to_bytes(self, failing, ptr, size):
        return self.memory[ptr]

    def _prof_init(self, failing, path):
        self.loaded_before_prof_init = any(k == "mdl.load_from_file" for k, _ in self.live)
        if failing:
            return self.ERROR
        self.live.append(("prof.init", None))
        return 0

    def _prof_create_config(self, failing, devices, metrics, events, flags):
        self.prof_flags = flags
        return self._acquire("prof.create_config", failing, pair=False)

    def _prof_start(self, failing, config):
        if failing:
            return self.ERROR
        self.executes_before_start = getattr(self, "executes", 0)
        self.live.append(("prof.start", config))
        return 0


class _Space:
    def __init__(self, acl: FakeAcl, prefix: str):
        self._acl, self._prefix = acl, prefix

    def __getattr__(self, name):
        return lambda *args: self._acl.call(f"{self._prefix}.{name}", *args)


for _name in ("init", "finalize", "create_data_buffer", "destroy_data_buffer"):
    setattr(FakeAcl, _name, (lambda n: lambda self, *args: self.call(n, *args))(_name))


FEED = np.arange(32 * 1024, dtype=np.float32).reshape(32, 1024) / 1000


PROF_DIR = Path(tempfile.gettempdir())  # acl.prof.init takes an existing folder; the fake writes nothing there


def run_fake(acl: FakeAcl, prof: bool = False, device: int = 0):
    return lesson.run_om(acl, Path("/m/a.om"), device, [FEED], 3, 20, prof_dir=PROF_DIR if prof else None)


def assert_released_in_reverse(acl: FakeAcl, acquired_order: list) -> None:
    assert acl.live == [], f"leaked: {acl.live}"
    assert acl.released == list(reversed(acquired_order))


def acquisitions(acl: FakeAcl) -> list:
    """Acquired resources in order, reconstructed from the release log (each released exactly once)."""
    return list(reversed(acl.released))


@pytest.mark.parametrize("prof", [False, True])
def test_chain_success_releases_everything(prof):
    acl = FakeAcl(FEED.nbytes)
    (out,) = run_fake(acl, prof)
    np.testing.assert_array_equal(out, FEED)
    assert acl.live == []
    kinds = [k for k, _ in acquisitions(acl)]
    assert kinds.count("create_data_buffer") == 2 and kinds.count("mdl.create_dataset") == 2
    assert kinds.count("rt.malloc") == 2 and "rt.malloc_host" in kinds
    chain = ["init", "rt.set_device", "rt.create_context", *(["prof.init"] if prof else []), "mdl.load_from_file"]
    assert kinds[: len(chain)] == chain
    # Each data buffer is destroyed before its device memory is freed, and the dataset that held it after both.
    order = [name for name in acl.calls if name in ("mdl.destroy_dataset", "destroy_data_buffer", "rt.free")]
    assert order == ["destroy_data_buffer", "rt.free", "mdl.destroy_dataset"] * 2
    assert [c for c in acl.calls if not c.startswith("prof.")][-3:] == [
        "rt.destroy_context",
        "rt.reset_device",
        "finalize",
    ]
    assert acl.executes == 23
    if prof:
        # CANN pyACL reference, "Profiling pyACL API": prof.init after acl.init and before the model load;
        # start before the measured executes (the 3 warm-up executes come before it: not collected).
        assert acl.loaded_before_prof_init is False
        assert acl.calls.index("init") < acl.calls.index("prof.init") < acl.calls.index("mdl.load_from_file")
        assert acl.executes_before_start == 3, "acl.prof starts after the warm-up"
        prof_calls = [c for c in acl.calls if c.startswith("prof.")]
        assert prof_calls == [
            "prof.init",
            "prof.create_config",
            "prof.start",
            "prof.stop",
            "prof.destroy_config",
            "prof.finalize",
        ]
        # acl_prof.h: ACL_PROF_ACL_API 0x1 | ACL_PROF_TASK_TIME 0x2 | ACL_PROF_AICORE_METRICS 0x4 | ACL_PROF_AICPU 0x8
        assert acl.prof_flags == 0x1 | 0x2 | 0x4 | 0x8
        # Profiling stops right after the measured executes, before the output is copied back; one
        # init/finalize pair, and stop, destroy_config, finalize all before acl.finalize.
        assert acl.calls.index("prof.destroy_config") < acl.calls.index("rt.malloc_host")
        assert acl.calls.count("prof.init") == acl.calls.count("prof.finalize") == 1
        assert acl.calls.index("prof.finalize") < acl.calls.index("finalize") == len(acl.calls) - 1
        # oam-tools "使用acl C&C++接口采集性能数据": unload the model, stop / destroy_config / finalize
        # profiling, then release the runtime resources, then acl.finalize.
        assert (
            acl.calls.index("mdl.unload")
            < acl.calls.index("prof.finalize")
            < acl.calls.index("rt.destroy_context")
            < acl.calls.index("rt.reset_device")
        )


def _failable_calls(prof: bool) -> int:
    acl = FakeAcl(FEED.nbytes)
    run_fake(acl, prof)
    return acl._count


@pytest.mark.fault
@pytest.mark.parametrize("prof", [False, True])
def test_chain_failure_at_every_step_releases_what_was_acquired(prof):
    total = _failable_calls(prof)
    assert total > 40  # 23 executes + the set-up: the loop below really walks the chain
    for fail_at in range(total):
        acl = FakeAcl(FEED.nbytes, fail_at=fail_at)
        try:
            outputs, message = run_fake(acl, prof), None
        except RuntimeError as err:
            message = str(err)
        failed_call = acl.calls[
            [i for i, c in enumerate(acl.calls) if c not in FakeAcl.RELEASES and c not in FakeAcl.NEVER_FAIL][fail_at]
        ]
        if message is None:  # a count of 0 outputs is no error code: the lab finds no output.npy (read_outputs)
            assert failed_call == "mdl.get_num_outputs" and outputs == [] and acl.live == []
            continue
        assert failed_call.split(".")[-1].split("_by_")[0] in message or "bytes" in message, (
            fail_at,
            failed_call,
            message,
        )
        assert acl.live == [], f"step {fail_at} ({failed_call}) leaked {acl.live}"
        assert len(set(acl.released)) == len(acl.released), "released twice"


@pytest.mark.fault
def test_release_failure_still_releases_the_rest_and_is_reported():
    acl = FakeAcl(FEED.nbytes, fail_release="destroy_data_buffer")
    with pytest.raises(RuntimeError, match=r"acl.destroy_data_buffer failed with ACL error 507011"):
        run_fake(acl)
    assert acl.live == []


def test_wrong_size_om_is_a_clear_error_and_releases():
    acl = FakeAcl(FEED.nbytes // 2)  # an om built for fp16 IO, fed fp32
    with pytest.raises(RuntimeError, match=r"takes inputs of \[65536\] bytes, the inputs given have \[131072\]"):
        run_fake(acl)
    assert acl.live == []


def test_every_input_is_fed_and_the_input_count_checked():
    """Two inputs: two device buffers in the input dataset, each copied in; a model of one input is refused."""
    second = np.full((4, 8), 2.5, np.float16)
    acl = FakeAcl([FEED.nbytes, second.nbytes], outputs=[((8,), 1)])
    (out,) = lesson.run_om(acl, Path("/m/a.om"), 0, [FEED, second], 3, 20)
    kinds = [k for k, _ in acquisitions(acl)]
    assert kinds.count("rt.malloc") == 3 and acl.live == []
    assert acl.calls.count("rt.memcpy") == 3  # two inputs in, one output back
    acl = FakeAcl(FEED.nbytes)
    with pytest.raises(RuntimeError, match=r"takes inputs of \[131072\] bytes, the inputs given have \[131072, 64\]"):
        lesson.run_om(acl, Path("/m/a.om"), 0, [FEED, second], 3, 20)
    assert acl.live == []


def test_outputs_take_their_sizes_dims_and_dtypes_from_the_model_description():
    """Not the input's shape: [32, 1024] fp32 in, [32, 10] fp16 and [32] int32 out (a model of yours)."""
    acl = FakeAcl(FEED.nbytes, outputs=[((32, 10), 1), ((32,), 3)])
    first, second = run_fake(acl, device=5)
    assert (first.shape, first.dtype, second.shape, second.dtype) == ((32, 10), np.float16, (32,), np.int32)
    assert first.tobytes() == FEED.tobytes()[: first.nbytes]  # what the fake model wrote, read back by its dims
    assert ("rt.set_device", 5) in acquisitions(acl) and acl.live == []
    kinds = [k for k, _ in acquisitions(acl)]
    assert kinds.count("rt.malloc") == 3 and kinds.count("rt.malloc_host") == 2
    assert kinds.count("mdl.create_dataset") == 2
    for outputs, message in [([((32, -1), 0)], r"dims \[32, -1\]"), ([((32, 10), 99)], "aclDataType 99")]:
        acl = FakeAcl(FEED.nbytes, outputs=outputs)
        with pytest.raises(RuntimeError, match=message):
            run_fake(acl)
        assert acl.live == []


def test_check_names_call_and_code():
    lesson.check("acl.mdl.execute", 0)
    with pytest.raises(RuntimeError, match=r"acl.mdl.execute failed with ACL error 107000"):
        lesson.check("acl.mdl.execute", 107000)


def test_lesson_selects_its_logical_device_and_saves_the_model_output(tmp_path, monkeypatch):
    """infer.py --om ... --device 2: acl.rt.set_device(2) in the lesson itself; fp16-io's output saved as fp16,
    and the lab refuses an output in another dtype than the variant's."""
    om = tmp_path / "m.om"
    om.write_bytes(b"om")
    variant = variants.VARIANTS["fp16-io"]
    (feed,) = TINY.feeds(variant)
    inputs = acl_worker.save_inputs(tmp_path / "inputs.npz", [feed])
    fake = FakeAcl(feed.nbytes, outputs=[((32, 1024), 1), ((32,), 3)])
    monkeypatch.setitem(sys.modules, "acl", fake)
    argv = acl_worker.lesson_argv(om, inputs, tmp_path / "out.npy", device=2)
    assert argv[1:6] == [str(MODE / "src" / "infer.py"), "--om", str(om), "--device", "2"]
    assert lesson.main(argv[2:]) == 0  # the lesson, as the lab launches it
    saved = acl_worker.read_outputs(variant, om, tmp_path / "out.npy", 2)
    assert saved[0].dtype == np.float16 and saved[0].shape == (32, 1024) and ("rt.set_device", 2) in acquisitions(fake)
    assert saved[0].tobytes() == feed.tobytes()  # the array of inputs.npz reached the device
    assert saved[1].dtype == np.int32  # a second output, saved beside the first (out_1.npy)
    assert "prof.init" not in fake.calls  # --no-acl-prof: msprof wraps the program
    wrong = FakeAcl(feed.nbytes, outputs=[((32, 512), 0)])  # an om built for another variant: fp32 output
    monkeypatch.setitem(sys.modules, "acl", wrong)
    assert lesson.main(acl_worker.lesson_argv(om, inputs, tmp_path / "o.npy", device=0)[2:]) == 0
    with pytest.raises(LabError, match="gives float32 at output 0, variant fp16-io expects float16"):
        acl_worker.read_outputs(variant, om, tmp_path / "o.npy", 1)
    failing = FakeAcl(feed.nbytes, fail_at=0)  # acl.init fails: one Error line, exit 1
    monkeypatch.setitem(sys.modules, "acl", failing)
    with pytest.raises(SystemExit, match="Error: acl.init failed with ACL error 507011"):
        lesson.main(argv[2:])


# ----- other workloads ----------------------------------------------------------------------------------
TWO_IN_TWO_OUT = """
import torch
from torch import nn


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 8), nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, image, extra):
        h = torch.relu(self.a(image) + self.b(extra))
        return self.head(h), h.sum(dim=1)


def build_model():
    return TwoHeads()


def make_input():
    g = torch.Generator().manual_seed(1)
    return torch.randn(6, 16, generator=g), torch.randn(6, 4, generator=g)
"""

# Outputs of ~100: fp16 rounding moves them by more than an absolute 5e-3, by far less than 2% of their scale.
LARGE_OUTPUTS = """
import torch
from torch import nn


def build_model():
    model = nn.Linear(1024, 64)
    with torch.no_grad():
        model.weight.mul_(300.0)
        model.bias.mul_(300.0)
    return model


def make_input():
    return torch.randn(16, 1024, generator=torch.Generator().manual_seed(1))
"""


def build_and_run(repo: Path, workload: Path, *variant: str) -> subprocess.CompletedProcess:
    built = sh(repo, "build_model.sh", *variant, "--workload", str(workload))
    assert built.returncode == 0, built.stdout + built.stderr
    return sh(repo, "run.sh", "0", *variant, "--workload", str(workload))


def run_info(repo: Path) -> dict:
    return json.loads((repo / MODE.name / "prof_out" / "run_info.json").read_text())


def verdict_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(("[PASS]", "[FAIL]", "[N/A]"))]


@pytest.fixture(scope="module")
def cnn_repo(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    repo = copy_lab(tmp_path_factory.mktemp("pyacl_cnn") / "lab")
    return repo, build_and_run(repo, repo / "workloads" / "cnn.py")


def test_cnn_runs_with_its_fusions_named(cnn_repo):
    repo, result = cnn_repo
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "fp32 (ONNX Runtime): Conv+Relu -> FusedConv x2" in out
    lines = verdict_lines(result)
    assert lines and not [line for line in lines if line.startswith("[FAIL]")]
    # The exported graph (BatchNorm folded into the convolutions) against the model, by FLOPs: the same work.
    (compute,) = [line for line in lines if "the exported graph computes what the model computes" in line]
    conv = 2 * 8 * 32 * 32 * 32 * 3 * 9 + 2 * 8 * 64 * 16 * 16 * 32 * 9
    assert compute.startswith("[PASS]") and f"convolutions: model {conv:.4g}, graph {conv:.4g} FLOP" in compute
    # No declared expectation: the Cast lesson checks say why they do not apply, and do not fail.
    assert "[N/A] Cast present (default): not applicable: cnn declares no EXPECT['cast_on_03_default']" in out
    assert "[N/A] declared top family (fp32): not applicable: cnn declares no EXPECT['top_family']" in out
    info = run_info(repo)
    assert info["workload"] == load_workload(repo / "workloads" / "cnn.py").info()
    assert info["workload"]["name"] == "cnn" and len(info["workload"]["sha256"]) == 64
    counts = graph_counts(repo, "fp32", "cnn")
    flatten = (
        "Reshape" if counts["Reshape"] else "Flatten"
    )  # torch.flatten: the dynamo exporter's Reshape, the tracer's
    assert counts == Counter({"FusedConv": 2, "MaxPool": 2, flatten: 1, "Gemm": 1}), counts
    changes = {c["change"] for c in info["results"]["fp32"]["graph_changes"]}
    assert "Conv+Relu -> FusedConv x2" in changes
    assert info["compute_check"]["ok"] is True


def test_transformer_runs(tmp_path):
    repo = copy_lab(tmp_path / "lab")
    result = build_and_run(repo, repo / "workloads" / "transformer.py")
    assert result.returncode == 0, result.stdout + result.stderr
    # the dynamo exporter's graph (its GELU order is not one ONNX Runtime fuses) against the model, by FLOPs
    assert "[PASS] the exported graph computes what the model computes" in result.stdout
    lines = verdict_lines(result)
    assert lines and not [line for line in lines if line.startswith("[FAIL]")]
    # the export writes the fused attention as MatMuls and a Softmax: the same matrix products, by FLOPs
    (compute,) = [line for line in lines if "the exported graph computes what the model computes" in line]
    assert compute.startswith("[PASS] ") and "matrix products: model" in compute and "off by 0.00%" in compute
    assert run_info(repo)["workload"]["name"] == "transformer"


def test_two_inputs_two_outputs(tmp_path):
    repo = copy_lab(tmp_path / "lab")
    workload = tmp_path / "two_heads.py"
    workload.write_text(TWO_IN_TWO_OUT)
    result = build_and_run(repo, workload)
    assert result.returncode == 0, result.stdout + result.stderr
    files = variants.ModelFiles(load_workload(workload))
    assert (files.input_names, files.output_names) == (["image", "extra"], ["y0", "y1"])
    assert files.atc_input_shape() == "image:6,16;extra:6,4"
    assert variants.VARIANTS["fp16-io"].atc_options(files.float_inputs)[0] == "--input_fp16_nodes=image;extra"
    lines = verdict_lines(result)
    for name in VARIANT_NAMES:  # one accuracy verdict per output, every output of every variant
        for output in ("y0", "y1"):
            assert any(
                line.startswith(f"[PASS] output matches fp32 reference ({name}, output {output})") for line in lines
            ), output
    results = run_info(repo)["results"]
    assert [o["name"] for o in results["default"]["accuracy_per_output"]] == ["y0", "y1"]


def test_a_model_built_for_another_workload_is_refused(cnn_repo, tmp_path):
    """Same name, other content (an edited cnn.py): the .onnx records the hash, so run.sh refuses it."""
    repo, _ = cnn_repo
    edited = tmp_path / "cnn.py"
    edited.write_text((repo / "workloads" / "cnn.py").read_text() + "\n# edited: BATCH and friends changed\n")
    result = sh(repo, "run.sh", "0", "fp32", "--workload", str(edited))
    assert_usage_error(result, "was built for workload cnn", "rebuild it", f"build_model.sh --workload {edited}")
    # The other way round: the TinyMLP name with another workload's file in it.
    tiny = repo / MODE.name / "model" / "tiny_mlp.onnx"
    shutil.copy(repo / MODE.name / "model" / "cnn.onnx", tiny)
    try:
        assert_usage_error(sh(repo, "run.sh", "0", "fp32"), "tiny_mlp.onnx takes x[8, 3, 32, 32]", "feeds x[32, 1024]")
    finally:
        tiny.unlink()


def test_tolerance_is_relative_to_the_output_scale(tmp_path):
    repo = copy_lab(tmp_path / "lab")
    workload = tmp_path / "large_outputs.py"
    workload.write_text(LARGE_OUTPUTS)
    result = build_and_run(repo, workload, "default")
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = run_info(repo)["results"]["default"]["accuracy_per_output"]
    assert 50 < row["scale"] < 1000  # outputs of ~100
    assert row["max_abs_diff"] > 5e-3, "an absolute 5e-3 (the old rule) would have failed this fp16 run"
    assert (
        row["max_abs_diff"] <= variant_checks.FP16_REL_TOL * row["scale"] + variant_checks.FP16_ABS_FLOOR == row["tol"]
    )
    assert variant_checks.tolerance(variants.VARIANTS["fp32"].fp16_compute, 100.0) == pytest.approx(
        0.1 + variant_checks.FP32_ABS_FLOOR
    )


def test_graph_changes_are_named_not_silent():
    """A rule names what it knows; anything else is listed as removed / added, with its families."""
    exported = Counter(Conv=2, Relu=2, MatMul=1, Add=1, Shape=2)
    built = Counter(FusedConv=2, Gemm=1, Mystery=1)
    changes = graph_changes.build_changes(exported, built, "onnxruntime", Counter(Relu=2))
    assert [str(c) for c in changes] == [
        "Conv+Relu -> FusedConv x2",
        "MatMul+Add -> Gemm x1",
        "removed Shape x2",
        "added Mystery x1",
    ]


SCATTER_ADD = """
import torch
from torch import nn


class Messages(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, dst):
        # in-degree of each row: ones added at the destinations (a ScatterElements with reduction 'add')
        degree = torch.zeros(x.shape[0], dtype=x.dtype).scatter_add(0, dst, torch.ones_like(dst, dtype=x.dtype))
        return self.fc(x) / degree.clamp(min=1).unsqueeze(1)


def build_model():
    return Messages()


def make_input():
    return torch.randn(6, 8, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1, 1, 3, 2, 0])
"""


def test_an_op_without_an_fp16_kernel_keeps_fp32_as_atc_does(tmp_path):
    """ONNX Runtime's CPU provider has no fp16 ScatterElements with reduction 'add': the fp16 variant keeps that
    op in fp32 and says so, instead of building a graph its own runtime cannot run (a false failure)."""
    repo = copy_lab(tmp_path / "lab")
    workload = tmp_path / "messages.py"
    workload.write_text(SCATTER_ADD)
    built = sh(repo, "build_model.sh", "default", "--workload", str(workload))
    assert built.returncode == 0, built.stdout + built.stderr
    assert "[default] kept in fp32, as ATC keeps an op without an fp16 kernel: ScatterElements" in built.stdout
    assert "E:onnxruntime" not in built.stderr  # the refusal is read, not logged
    ran = sh(repo, "run.sh", "0", "default", "--workload", str(workload))
    assert ran.returncode == 0 and "[FAIL]" not in ran.stdout, ran.stdout + ran.stderr


# An eigendecomposition: neither exporter has it (torch.export's ONNX functions, nor the tracer at opset 17).
EIGH = """
import torch
from torch import nn


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        return torch.linalg.eigh(h.T @ h).eigenvalues


def build_model():
    return Spectral()


def make_input():
    return torch.randn(4, 8)
"""


def test_an_export_the_exporter_refuses_is_one_short_line(tmp_path):
    """The exporters print the traced graph and long explanations: the build shows neither, only why, in one line (the
    tracer's refusal, after the dynamo exporter's)."""
    repo = copy_lab(tmp_path / "lab")
    workload = tmp_path / "pool.py"
    workload.write_text(EIGH)
    built = sh(repo, "build_model.sh", "default", "--workload", str(workload))
    assert built.returncode == 2 and "Torch IR graph" not in built.stdout + built.stderr, built.stdout
    (line,) = error_lines(built.stderr)
    assert "torch.onnx.export failed: UnsupportedOperatorError: Exporting the operator 'aten::linalg_eigh'" in line
    assert "[Caused by" not in line and len(line) < 400, line


def test_the_files_check_names_its_variant_and_fails_a_missing_file(tmp_path):
    from common.modes.pyacl.variant_report import file_verdict

    files = {"op_summary": tmp_path / "op_summary_1.csv", "op_statistic": tmp_path / "op_statistic_1.csv"}
    verdict = file_verdict("fp16-io", files, npu=False)
    assert verdict.name == "files and columns (fp16-io)" and not verdict.ok
    assert verdict.detail.startswith("op_summary_1.csv ") and "error:" in verdict.detail
