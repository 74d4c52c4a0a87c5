"""Workloads: the default TinyMLP, the shipped workload files, bad files, and expected op counts
checked against what the portable task rule measures from a real torch.profiler run."""

from __future__ import annotations

import hashlib
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import ROOT

from common import workload as wl
from common.analyze.families import family_counts, op_family
from common.collect import torch_ops
from common.errors import LabError, run_cli

CNN, TRANSFORMER = ROOT / "workloads" / "cnn.py", ROOT / "workloads" / "transformer.py"

# Attention written out by hand: q @ k^T, softmax, @ v, next to the fused scaled_dot_product_attention.
FUNCTIONAL_ATTENTION = """
import torch
from torch import nn
from torch.nn import functional as F

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.drop = nn.Linear(64, 192), nn.Dropout(0.1)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 4, 16).permute(2, 0, 3, 1, 4)
        a = F.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)
        y = self.drop(a) @ v + F.scaled_dot_product_attention(q, k, v)
        return torch.relu(y.transpose(1, 2).reshape(b, t, c))

def build_model():
    return Attention()

def make_input():
    return torch.randn(2, 8, 64)
"""

GOOD = """
import torch
def build_model():
    return torch.nn.Linear(4, 2)
def make_input():
    return torch.ones(3, 4)
"""


@pytest.fixture(autouse=True)
def _no_env(monkeypatch) -> None:
    monkeypatch.delenv(wl.ENV_VAR, raising=False)


def write(tmp_path: Path, text: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def measured_counts(workload: wl.Workload) -> dict[str, int]:
    """Task counts per family of one profiled forward (after a warm-up), as the portable collectors count them."""
    model, x = workload.build_model(), workload.inputs()
    with torch.no_grad():
        model(*x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
            model(*x)
    start = prof.profiler.kineto_results.trace_start_ns() / 1000.0
    return dict(family_counts(torch_ops.tasks_from_nodes(torch_ops.nodes_from_events(prof.events()), start)))


# --- the default and the shipped workloads -------------------------------------------------------------
def test_default_is_tiny_mlp_with_4_matmul_and_3_gelu_per_forward() -> None:
    tiny = wl.load_workload(None)
    assert tiny is wl.tiny_mlp() and tiny.name == "TinyMLP" and tiny.path is None and tiny.loss is None
    assert len(tiny.sha256) == 64 and tiny.info() == {"name": "TinyMLP", "path": None, "sha256": tiny.sha256}
    counts = tiny.expected_op_counts()
    assert counts.per_op == {"aten::addmm": 4, "aten::gelu": 3}
    assert counts.per_family == {op_family("aten::addmm"): 4, op_family("aten::gelu"): 3}
    assert wl.expected_op_counts() == wl.expected_op_counts(wl.build_model()) == counts.checked == counts.per_family
    assert tiny.expectations["top_family"] == "matmul" and tiny.not_applicable("top_family").startswith("not applicable")


def test_tiny_mlp_counts_equal_the_portable_measurement() -> None:
    assert wl.tiny_mlp().expected_op_counts().per_family == measured_counts(wl.tiny_mlp())


def test_tiny_mlp_reference_and_the_old_names() -> None:
    ref = wl.reference_output()
    assert ref.shape == (wl.BATCH, wl.HIDDEN) and ref.dtype.name == "float32"
    ref[0, 0] += 1.0  # a copy: the cached reference must not change
    with torch.no_grad():
        out = wl.build_model()(wl.make_input())
    assert wl.compare_to_reference(out)["max_abs_diff"] == 0.0
    assert wl.compare_to_reference(out.numpy(), wl.reference_output())["cosine"] == pytest.approx(1.0)
    assert wl.compare_to_reference(ref)["max_abs_diff"] == pytest.approx(1.0)
    with pytest.raises(LabError, match="does not match the reference"):
        wl.compare_to_reference(out[:4])


def test_environment_variable_names_the_workload_and_a_path_wins(monkeypatch) -> None:
    monkeypatch.setenv(wl.ENV_VAR, str(CNN))
    assert wl.load_workload(None).name == "cnn"
    assert wl.load_workload(TRANSFORMER).name == "transformer"
    monkeypatch.setenv(wl.ENV_VAR, "")
    assert wl.load_workload(None).name == "TinyMLP"


@pytest.mark.parametrize(("path", "in_shape", "out_shape"), [
    (CNN, (8, 3, 32, 32), (8, 10)), (TRANSFORMER, (4, 64, 128), (4, 64, 128))])
def test_shipped_workload_loads_runs_and_trains(path: Path, in_shape, out_shape) -> None:
    work = wl.load_workload(path)
    assert work.name == path.stem and work.path == str(path.resolve())
    assert work.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert wl.load_workload(str(path)) is work  # loaded once per process
    model, x = work.build_model(), work.make_input()
    assert isinstance(model, torch.nn.Module) and not model.training and tuple(x.shape) == in_shape
    assert work.reference_output().shape == out_shape
    torch.manual_seed(12345)  # whatever the global RNG holds, the workload's seeds decide weights and input
    torch.rand(7)
    with torch.no_grad():
        again = work.build_model()(work.make_input())
    metrics = work.compare_to_reference(again)
    assert metrics["max_abs_diff"] < 1e-5 and metrics["cosine"] > 0.99999
    assert work.expectations == {} and "declares no EXPECT['top_family']" in work.not_applicable("top_family")
    model.train()  # the loss drives a training step
    loss = work.loss(model(x), x)
    loss.backward()
    assert loss.numel() == 1 and all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("path", [CNN, TRANSFORMER])
def test_expected_counts_equal_the_portable_measurement(path: Path) -> None:
    work = wl.load_workload(path)
    counts = work.expected_op_counts()
    assert counts.per_family == measured_counts(work)
    assert sum(counts.per_op.values()) == sum(counts.per_family.values())


def test_shipped_counts_see_conv_relu_and_fused_attention() -> None:
    cnn = wl.load_workload(CNN).expected_op_counts().per_family
    assert cnn[op_family("aten::convolution")] == 2 and cnn[op_family("aten::relu")] >= 2
    assert cnn[op_family("aten::max_pool2d")] == 2 and cnn[op_family("aten::addmm")] == 1
    attention = wl.load_workload(TRANSFORMER).expected_op_counts().per_op
    assert attention["aten::_native_multi_head_attention"] == 1 and attention["aten::native_layer_norm"] == 2


def test_functional_attention_counts_equal_the_measurement(tmp_path: Path) -> None:
    work = wl.load_workload(write(tmp_path, FUNCTIONAL_ATTENTION))
    counts = work.expected_op_counts()
    assert counts.per_op["aten::bmm"] == 2 and counts.per_op["aten::_softmax"] == 1  # q @ k^T and a @ v
    measured = {f: n for f, n in measured_counts(work).items() if f not in wl.BACKEND_DEPENDENT_FAMILIES}
    assert counts.checked == measured


def test_several_inputs_and_outputs(tmp_path: Path) -> None:
    path = write(tmp_path, """
        import torch
        class Two(torch.nn.Module):
            def forward(self, a, b):
                return a @ b, torch.relu(a)
        def build_model():
            return Two()
        def make_input():
            return [torch.randn(3, 4), torch.randn(4, 5)]
        def loss(output, inputs):
            return output[0].sum()
        EXPECT = {"top_family": "matmul"}
        """)
    work = wl.load_workload(path)
    x = work.make_input()
    assert isinstance(x, tuple) and len(x) == 2 and work.expectations == {"top_family": "matmul"}
    a, b = work.reference_output()
    assert a.shape == (3, 5) and b.shape == (3, 4)
    assert work.compare_to_reference(work.forward(work.build_model(), x))["max_abs_diff"] == 0.0
    with pytest.raises(LabError, match="does not match the reference"):
        work.compare_to_reference(a)
    assert work.expected_op_counts().per_family == {op_family("aten::mm"): 1, op_family("aten::relu"): 1}


def test_ops_on_weights_and_buffers_only_are_counted_apart(tmp_path: Path) -> None:
    """What an exporter may compute ahead of time: ops none of whose tensors come from the input."""
    path = write(tmp_path, """
        import torch
        class Scaled(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 4)
                self.log_scale = torch.nn.Parameter(torch.zeros(4))
                self.register_buffer("shift", torch.ones(4))
            def forward(self, x):
                y = self.fc(x) * self.log_scale.exp()  # exp: weights only; the Mul: input
                return y + self.shift * 0.1 + torch.arange(4.0)  # shift * 0.1 and arange: no input in them
        def build_model():
            return Scaled()
        def make_input():
            return torch.randn(2, 4)
        """)
    counts = wl.load_workload(path).expected_op_counts()
    assert sum(counts.per_family.values()) == 7  # addmm, exp, mul x2, add x2, arange
    assert counts.constant == {op_family("aten::exp"): 2, op_family("aten::arange"): 1}, counts  # exp, * 0.1; arange
    assert wl.tiny_mlp().expected_op_counts().constant == {}  # every TinyMLP op works on the input


def test_hash_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cnn.py"
    shutil.copy(CNN, path)
    first = wl.load_workload(path)
    assert first.sha256 == hashlib.sha256(CNN.read_bytes()).hexdigest()
    path.write_text(path.read_text() + "\n# one more line\n")
    second = wl.load_workload(path)
    assert second.sha256 != first.sha256 and second.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


# --- bad workload files: one Error line naming the file, exit 2 -------------------------------------------
BAD = {
    "syntax error": ("def build_model(:\n", "syntax error at line 1"),
    "import error": ("import no_such_module_for_the_lab\n", "no_such_module_for_the_lab"),
    "top level raises": ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
    "top level exits": ("import sys\nsys.exit(3)\n", "SystemExit"),
    "no build_model": ("import torch\ndef make_input():\n    return torch.ones(1)\n", "defines no build_model()"),
    "no make_input": ("import torch\ndef build_model():\n    return torch.nn.ReLU()\n", "defines no make_input()"),
    "build_model not a Module": (GOOD.replace("return torch.nn.Linear(4, 2)", "return 42"), "returned int"),
    "build_model raises": (GOOD.replace("return torch.nn.Linear(4, 2)", "raise ValueError('no weights')"),
                           "build_model() failed: ValueError: no weights"),
    "make_input not tensors": (GOOD.replace("return torch.ones(3, 4)", "return [1, 2]"), "returned a list of int, int"),
    "make_input a string": (GOOD.replace("return torch.ones(3, 4)", "return 'x'"), "returned str"),
    "input rejected": (GOOD.replace("torch.ones(3, 4)", "torch.ones(3, 5)"), "mat1 and mat2 shapes cannot be multiplied"),
    "output not tensors": (("import torch\nclass D(torch.nn.Module):\n    def forward(self, x):\n        return {'y': x}\n"
                           "def build_model():\n    return D()\ndef make_input():\n    return torch.ones(3, 4)\n"),
                           "returned dict"),
    "output has a None": (("import torch\nclass P(torch.nn.Module):\n    def forward(self, x):\n        return x, None\n"
                           "def build_model():\n    return P()\ndef make_input():\n    return torch.ones(3, 4)\n"),
                          "returned a tuple of Tensor, NoneType"),
    "loss not scalar": (GOOD + "def loss(output, inputs):\n    return output\n", "not a scalar tensor"),
    "loss not callable": (GOOD + "loss = 3\n", "not a function but int"),
    "EXPECT unknown key": (GOOD + "EXPECT = {'fastest': True}\n", "unknown key 'fastest'"),
    "EXPECT unknown family": (GOOD + "EXPECT = {'top_family': 'magic'}\n", "names no op family"),
}


def one_error(capsys, path) -> str:
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: wl.load_workload(path) and 0)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert exit_.value.code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), err
    assert " — " in lines[0] and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_workload_file_gives_one_error(case: str, tmp_path: Path, capsys) -> None:
    text, says = BAD[case]
    path = tmp_path / "bad_workload.py"
    path.write_text(text)
    line = one_error(capsys, path)
    assert str(path) in line and says in line


def test_missing_file_and_folder_give_one_error(tmp_path: Path, capsys, monkeypatch) -> None:
    missing = tmp_path / "nope.py"
    assert str(missing) in one_error(capsys, missing) and "does not exist" in one_error(capsys, missing)
    assert "is not a file" in one_error(capsys, tmp_path)
    monkeypatch.setenv(wl.ENV_VAR, str(missing))
    assert wl.ENV_VAR in one_error(capsys, None)


def test_a_file_that_is_fixed_loads(tmp_path: Path, capsys) -> None:
    path = tmp_path / "w.py"
    path.write_text(BAD["input rejected"][0])
    one_error(capsys, path)
    path.write_text(GOOD)
    assert wl.load_workload(path).reference_output().shape == (3, 2)


# --- threads -------------------------------------------------------------------------------------------------
def test_use_threads() -> None:
    before = torch.get_num_threads()
    try:
        assert wl.use_threads() == 1 == torch.get_num_threads()
        assert wl.use_threads(2) == 2
    finally:
        torch.set_num_threads(before)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(LabError):
            wl.use_threads(bad)


# --- the documented examples are workload files that load ------------------------------------------------
def python_blocks(markdown: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown.read_text(), flags=re.DOTALL)


def test_readme_tiny_mlp_file_is_the_built_in_one(tmp_path: Path) -> None:
    (block,) = python_blocks(ROOT / "workloads" / "README.md")
    work, tiny = wl.load_workload(write(tmp_path, block, "tiny_mlp.py")), wl.tiny_mlp()
    assert work.compare_to_reference(tiny.reference_output())["max_abs_diff"] == 0.0  # same seeds, same weights
    assert work.expected_op_counts() == tiny.expected_op_counts() and work.expectations == tiny.expectations


def test_own_model_doc_example_loads(tmp_path: Path) -> None:
    block = python_blocks(ROOT / "docs" / "own_model.md")[0]
    work = wl.load_workload(write(tmp_path, block, "my_model.py"))
    assert work.expected_op_counts().checked == measured_counts(work) and work.loss is not None


def test_ops_that_build_the_input_are_counted_once_for_a_program_profiled_whole(tmp_path) -> None:
    from common.analyze import checks
    from common.formats.records import Task

    path = tmp_path / "scaled_input.py"
    path.write_text(textwrap.dedent("""\
        import torch
        from torch import nn


        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x) * 3


        def build_model():
            return Scaled()


        def make_input():
            return torch.rand(3, 4) * 2 + 0.5
        """))
    work = wl.load_workload(str(path))
    assert work.input_op_counts().checked == {"elementwise": 2}  # mul, add; rand is init (not compared)

    def task(op: str) -> Task:
        return Task(op, op, "AI_CORE", 1.0, 0.0, 0.0, "0")

    tasks = [task("aten::addmm"), task("aten::mul")] * 5 + [task("aten::mul"), task("aten::add")]
    assert checks.check_forward_counts(tasks, 5, work, "x", with_input=True).ok
    assert not checks.check_forward_counts(tasks, 5, work, "x").ok  # without the input's ops: 2 too many


def test_composite_ops_count_the_same_in_the_model_and_in_the_profile(tmp_path) -> None:
    # nn.AdaptiveAvgPool2d(1) and nn.MaxPool2d are compositions (aten::mean, max_pool2d_with_indices): the
    # dispatcher sees the ops they call, and the portable task rule looks through them the same way.
    path = write(tmp_path, """
        import torch
        from torch import nn


        def build_model():
            return nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(4, 2))


        def make_input():
            return torch.randn(2, 3, 8, 8)
        """, "pools.py")
    work = wl.load_workload(str(path))
    measured = {f: n for f, n in measured_counts(work).items() if f not in wl.BACKEND_DEPENDENT_FAMILIES}
    assert work.expected_op_counts().checked == measured
