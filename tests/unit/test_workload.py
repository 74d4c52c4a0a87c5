"""Workloads: the default TinyMLP, the shipped workload files, bad files, the output contract (tuples,
dicts, dataclasses, fp16 / bf16) and the FLOPs per family mode 03 compares its graph with."""

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
from common.collect.flop_count import count_flops
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


# --- the default and the shipped workloads -------------------------------------------------------------
def test_default_is_tiny_mlp_with_4_matmul_and_3_gelu_per_forward() -> None:
    tiny = wl.load_workload(None)
    assert tiny is wl.tiny_mlp() and tiny.name == "TinyMLP" and tiny.path is None and tiny.loss is None
    assert len(tiny.sha256) == 64 and tiny.info() == {"name": "TinyMLP", "path": None, "sha256": tiny.sha256}
    assert tiny.samples == 32  # the batch: what compare divides a step by
    # 4 Linear(1024, 1024) on 32 rows: 2 x 32 x 1024 x 1024 FLOPs each (GELU does no multiply-add)
    assert tiny.forward_flops(count_flops) == wl.FlopCount({"matmul": 4 * 2 * 32 * 1024 * 1024})
    assert tiny.precision == "fp32"
    assert tiny.expectations["top_family"] == "matmul" and tiny.not_applicable("top_family").startswith(
        "not applicable"
    )


def test_tiny_mlp_reference_and_the_old_names() -> None:
    ref = wl.reference_output()
    assert ref.shape == (wl.BATCH, wl.HIDDEN) and ref.dtype.name == "float32"
    ref[0, 0] += 1.0  # a copy: the cached reference must not change
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the reference's summation order (one thread), whatever ran in this process before
    try:
        with torch.no_grad():
            out = wl.build_model()(wl.make_input())
    finally:
        torch.set_num_threads(threads)
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


@pytest.mark.parametrize(
    ("path", "in_shape", "out_shape"), [(CNN, (8, 3, 32, 32), (8, 10)), (TRANSFORMER, (4, 64, 128), (4, 64, 128))]
)
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


def test_flops_follow_the_shapes() -> None:
    # the CNN: two 3x3 convolutions (3 -> 32 on 32x32, 32 -> 64 on 16x16, batch 8) and a Linear(4096, 10)
    cnn = wl.load_workload(CNN).forward_flops(count_flops)
    conv = 2 * 8 * 32 * 32 * 32 * 3 * 9 + 2 * 8 * 64 * 16 * 16 * 32 * 9
    assert cnn.per_family == {"conv": conv, "matmul": 2 * 8 * 4096 * 10} and not cnn.uncounted


def test_flops_of_attention_fused_and_written_out(tmp_path: Path) -> None:
    flops = wl.load_workload(write(tmp_path, FUNCTIONAL_ATTENTION)).forward_flops(count_flops)
    qkv = 2 * 2 * 8 * 64 * 192  # the Linear on 2 x 8 tokens
    products = 2 * (2 * 2 * 4 * 8 * 8 * 16)  # q @ k^T and a @ v: batch 2, 4 heads, 8 x 8, head size 16
    assert flops.per_family == {"matmul": qkv + products, "attention": products}  # SDPA: the same two products
    # nn.MultiheadAttention's inference fast path is one fused op torch's counter has no formula for: counted here
    encoder = count_flops(
        torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval(), (torch.randn(2, 5, 16),)
    )
    tokens = 2 * 5
    assert encoder.per_family == {"attention": 2 * tokens * 16 * 16 * 4 + 4 * 2 * 5 * 5 * 16 + 4 * tokens * 16 * 32}
    # an LSTM layer (one fused op on the CPU) by hand: every step's input and hidden projections into 4 gates;
    # a GRU runs as matrix products torch's counter sees, the same products
    lstm = count_flops(torch.nn.LSTM(4, 8), (torch.randn(3, 2, 4),))
    assert lstm == wl.FlopCount({"recurrent": 2 * 3 * 2 * (4 * 8) * (4 + 8)})
    gru = count_flops(torch.nn.GRU(4, 8), (torch.randn(3, 2, 4),))
    assert sum(gru.per_family.values()) == 2 * 3 * 2 * (3 * 8) * (4 + 8) and not gru.uncounted


def test_several_inputs_and_outputs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
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
        """,
    )
    work = wl.load_workload(path)
    x = work.make_input()
    assert isinstance(x, tuple) and len(x) == 2 and work.expectations == {"top_family": "matmul"}
    a, b = work.reference_output()
    assert a.shape == (3, 5) and b.shape == (3, 4)
    assert work.compare_to_reference(work.forward(work.build_model(), x))["max_abs_diff"] == 0.0
    with pytest.raises(LabError, match="does not match the reference"):
        work.compare_to_reference(a)


@pytest.mark.parametrize(
    "returns",
    [
        "{'logits': a @ b, 'hidden': {'h': torch.relu(a)}}",
        "Out(a @ b, None, torch.relu(a))",
        "[a @ b, (torch.relu(a),)]",
    ],
)
def test_dict_dataclass_and_nested_outputs_flatten_in_order(tmp_path: Path, returns: str) -> None:
    path = write(
        tmp_path,
        f"""
        import dataclasses
        import torch

        @dataclasses.dataclass
        class Out:
            logits: torch.Tensor
            loss: torch.Tensor | None
            hidden: torch.Tensor

        class Two(torch.nn.Module):
            def forward(self, a, b):
                return {returns}
        def build_model():
            return Two()
        def make_input():
            return torch.randn(3, 4), torch.randn(4, 5)
        """,
    )
    work = wl.load_workload(path)
    logits, hidden = work.reference_output()  # declaration / insertion order, depth first; None left out
    assert logits.shape == (3, 5) and hidden.shape == (3, 4)


@pytest.mark.parametrize(("dtype", "precision"), [("torch.float16", "fp16"), ("torch.bfloat16", "bf16")])
def test_low_precision_models_and_their_fp32_copy(tmp_path: Path, dtype: str, precision: str) -> None:
    path = write(
        tmp_path,
        f"""
        import torch
        def build_model():
            return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).to({dtype})
        def make_input():
            return torch.randn(4, 8).to({dtype})
        """,
    )
    work = wl.load_workload(path)
    assert work.precision == precision
    model, (x,) = work.fp32_copy()
    assert x.dtype == torch.float32 and all(p.dtype == torch.float32 for p in model.parameters())
    copy = work.fp32_reference()[0]
    assert copy.dtype.name == "float32" and 0 < abs(copy - work.reference_output()).max() < 0.05  # rounding only


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
    "build_model raises": (
        GOOD.replace("return torch.nn.Linear(4, 2)", "raise ValueError('no weights')"),
        "build_model() failed: ValueError: no weights",
    ),
    "make_input not tensors": (GOOD.replace("return torch.ones(3, 4)", "return [1, 2]"), "returned a list of int, int"),
    "make_input a string": (GOOD.replace("return torch.ones(3, 4)", "return 'x'"), "returned str"),
    "input rejected": (
        GOOD.replace("torch.ones(3, 4)", "torch.ones(3, 5)"),
        "mat1 and mat2 shapes cannot be multiplied",
    ),
    "output not tensors": (
        (
            "import torch\nclass D(torch.nn.Module):\n    def forward(self, x):\n        return {'y': 3}\n"
            "def build_model():\n    return D()\ndef make_input():\n    return torch.ones(3, 4)\n"
        ),
        "returned a dict of int, not tensors",
    ),
    "output only None": (
        (
            "import torch\nclass P(torch.nn.Module):\n    def forward(self, x):\n        return None, None\n"
            "def build_model():\n    return P()\ndef make_input():\n    return torch.ones(3, 4)\n"
        ),
        "returned a tuple of NoneType, NoneType",
    ),
    "forward raises": (
        (
            "import torch\nclass R(torch.nn.Module):\n    def forward(self, x):\n        y = x * 2\n"
            "        raise ValueError('boom')\n"
            "def build_model():\n    return R()\ndef make_input():\n    return torch.ones(3, 4)\n"
        ),
        "forward() failed at",
    ),
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


def test_tiny_mlp_is_its_workload_file_loaded_like_any_other() -> None:
    path = ROOT / "workloads" / "tiny_mlp.py"
    work, tiny = wl.load_workload(path), wl.tiny_mlp()
    assert work.name == "tiny_mlp" and tiny.name == "TinyMLP" and tiny.path is None  # the default keeps its name
    assert tiny.sha256 == work.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert work.compare_to_reference(tiny.reference_output())["max_abs_diff"] == 0.0  # same seeds, same weights
    assert work.forward_flops(count_flops) == tiny.forward_flops(count_flops) and work.expectations == tiny.expectations
    assert wl.workload_identity() == tiny.info()


def test_own_model_doc_example_loads(tmp_path: Path) -> None:
    block = python_blocks(ROOT / "docs" / "own_model.md")[0]
    work = wl.load_workload(write(tmp_path, block, "my_model.py"))
    assert work.loss is not None and work.forward_flops(count_flops).per_family


# ----- outputs flattened by torch's pytree: Hugging Face's ModelOutput and its KV cache ----------------------------
DECODER = ROOT / "tests" / "corpus" / "decoder_kv_cache.py"
LESSONS_WITH_THE_CONTRACT = [
    "01_cmdline/src/model.py",
    "03_api_pyAcl/src/export_onnx.py",
    "04_pyTorch/src/model_with_profiler.py",
    "04_pyTorch/src/dynamic_profile.py",
    "04_pyTorch/src/ddp_with_profiler.py",
]


def test_a_registered_output_and_an_unregistered_cache_flatten_in_the_documented_order() -> None:
    """A ModelOutput-like dict registered with the pytree (None fields left out) holding the logits and a cache object
    nobody registered: logits, then each layer's keys and values; the cache's flags are no output."""
    work = wl.load_workload(DECODER)
    model, x = work.build_model(), work.make_input()
    with torch.no_grad():
        out = model(x)
    flat = wl.flatten_output(out)
    layers = out["cache"].layers
    expected = [out["logits"], *(t for layer in layers for t in (layer.keys, layer.values))]
    assert len(flat) == 5 and all(a is b for a, b in zip(flat, expected))
    assert [a.shape for a in work.reference_output_arrays()] == [(2, 12, 96), *[(2, 4, 12, 8)] * 4]


@pytest.mark.parametrize("lesson", LESSONS_WITH_THE_CONTRACT)
def test_every_lesson_copy_of_the_output_contract_flattens_as_the_lab_does(lesson: str) -> None:
    from dataclasses import dataclass

    from helpers import load_lesson

    @dataclass
    class Result:  # a plain dataclass, left whole by the pytree: its fields in declaration order
        hidden: torch.Tensor
        extra: object = None

    model = wl.load_workload(DECODER).build_model()
    with torch.no_grad():
        out = model(torch.randint(0, 96, (1, 4)))
    nested = {"a": (Result(torch.ones(1), (torch.zeros(2), None)), [out]), "b": None, "c": torch.full((3,), 2.0)}
    assert [id(t) for t in load_lesson(lesson).tensors(nested)] == [id(t) for t in wl.flatten_output(nested)]
    assert len(wl.flatten_output(nested)) == 2 + 5 + 1
