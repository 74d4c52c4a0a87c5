"""Records kept between runs (common.cache) and the workload's record (common.workload): used while what they
were computed from is unchanged, never after."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from common import cache, workload
from common.collect.flop_count import count_flops
from tests.helpers import ROOT as REPO_ROOT


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    where = tmp_path / "records"
    monkeypatch.setenv(cache.CACHE_VAR, str(where))
    return where


def test_watch_sees_files_read_and_modules_imported_not_files_written(tmp_path, monkeypatch):
    data, written, module = tmp_path / "weights.bin", tmp_path / "log.txt", tmp_path / "helper_mod_cache_test.py"
    data.write_bytes(b"w")
    module.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with cache.Watch() as read:
        data.read_bytes()
        written.write_text("x")
        import helper_mod_cache_test  # noqa: F401
        import json as _  # noqa: F401 (the standard library is the toolchain's, never a file of the record)
    assert read.files == {data.resolve(), module.resolve()}


def test_a_record_holds_until_a_file_extra_or_the_toolchain_changes(tmp_path, cache_dir, monkeypatch):
    source = tmp_path / "model.py"
    source.write_text("a = 1\n")
    inputs = cache.inputs_of([source], {"variants": ["fp32"]})
    cache.save("kind", "key", inputs, {"answer": 42})
    assert cache.load("kind", "key", {"variants": ["fp32"]})["result"] == {"answer": 42}
    assert cache.load("kind", "key", {"variants": ["fp16"]}) is None  # another extra
    assert cache.load("kind", "other key", {"variants": ["fp32"]}) is None
    monkeypatch.setattr(cache, "toolchain", lambda: {**inputs["toolchain"], "torch": "9.9"})
    assert cache.load("kind", "key", {"variants": ["fp32"]}) is None  # a new torch
    monkeypatch.undo()
    monkeypatch.setenv(cache.CACHE_VAR, str(cache_dir))
    source.write_text("a = 2\n")
    assert cache.load("kind", "key", {"variants": ["fp32"]}) is None  # the file changed
    source.unlink()
    assert cache.load("kind", "key", {"variants": ["fp32"]}) is None  # the file is gone


def test_a_damaged_record_is_no_record_and_off_turns_records_off(cache_dir, monkeypatch):
    path = cache.save("kind", "key", cache.inputs_of([]), {"answer": 1})
    path.write_text("{not json")
    assert cache.load("kind", "key") is None
    path.write_text(json.dumps({"key": "another", "inputs": cache.inputs_of([]), "result": {}}))
    assert cache.load("kind", "key") is None  # a name collision is not taken for the record
    monkeypatch.setenv(cache.CACHE_VAR, "off")
    assert cache.save("kind", "key", cache.inputs_of([]), {}) is None
    assert cache.load("kind", "key") is None


WORKLOAD = """
import numpy as np
import torch
from pathlib import Path
import layers_cache_test as layers

def build_model():
    scale = float(np.frombuffer(Path(__file__).with_name("scale.bin").read_bytes(), dtype=np.float32)[0])
    return layers.Scaled(scale)

def make_input():
    return torch.arange(6, dtype=torch.float32).reshape(2, 3)
"""
LAYERS = """
import torch

class Scaled(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale{extra}
"""
LOAD = """
import json, sys
from common.workload import load_workload
work = load_workload(sys.argv[1])
print(json.dumps({"out": work.reference_output_arrays()[0].tolist(), "torch": "torch" in sys.modules,
                  "params": work.forward_parameters(), "summary": work.summary()}))
"""


def _load(file, env) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(file)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_the_workload_record_skips_torch_until_the_model_or_a_file_it_read_changes(tmp_path, cache_dir):
    (tmp_path / "model.py").write_text(WORKLOAD)
    (tmp_path / "layers_cache_test.py").write_text(LAYERS.format(extra=""))
    (tmp_path / "scale.bin").write_bytes(np.float32(2.0).tobytes())
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), cache.CACHE_VAR: str(cache_dir)}
    first = _load(tmp_path / "model.py", env)
    assert first["torch"] and first["out"] == [[0, 2, 4], [6, 8, 10]] and first["params"] == ["x"]
    again = _load(tmp_path / "model.py", env)
    assert not again["torch"] and again["out"] == first["out"] and again["summary"] == first["summary"]
    (tmp_path / "scale.bin").write_bytes(np.float32(3.0).tobytes())  # data the model read
    assert _load(tmp_path / "model.py", env)["out"] == [[0, 3, 6], [9, 12, 15]]
    (tmp_path / "layers_cache_test.py").write_text(LAYERS.format(extra=" + 1"))  # a module it imported
    changed = _load(tmp_path / "model.py", env)
    assert changed["torch"] and changed["out"] == [[1, 4, 7], [10, 13, 16]]
    env[cache.CACHE_VAR] = "off"
    assert _load(tmp_path / "model.py", env)["torch"]


def test_a_restored_workload_builds_its_model_and_keeps_its_flops(tmp_path, cache_dir):
    (tmp_path / "model.py").write_text(
        textwrap.dedent("""
        import torch
        def build_model():
            return torch.nn.Linear(4, 3)
        def make_input():
            return torch.ones(2, 4)
        def loss(output, x):
            return output.sum()
    """)
    )
    file = tmp_path / "model.py"
    first = workload.load_workload(file)
    flops = first.forward_flops(count_flops)  # kept with the record
    workload.loader._LOADED.clear()
    restored = workload.load_workload(file)
    assert restored is not first and restored._flops == flops
    assert restored.loss is not None and restored.build_model().out_features == 3
    np.testing.assert_array_equal(restored.reference_output(), first.reference_output())
