"""Every mode's src/ holds lesson files only: templates a user copies alone, which the lab launches and never
the reverse. Each one imports nothing of the lab, reads top to bottom, and stays short; no module of
common/ reaches into a mode's folder (the harness lives in common/modes/)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import MODES, ROOT, code_lines, load_lesson

LESSONS = sorted(p for mode in MODES for p in (ROOT / mode / "src").iterdir() if p.is_file())
PYTHON_LESSONS = [p for p in LESSONS if p.suffix == ".py"]
MAX_LINES = {".py": 160, ".cpp": 250, ".h": 250, ".txt": 250}  # a .py lesson's code lines (see code_lines)
IMPORTS_THE_LAB = re.compile(r"^\s*(from|import)\s+common\b", re.MULTILINE)


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_mode_has_lesson_files_and_nothing_else_in_src() -> None:
    assert {p.relative_to(ROOT).parts[0] for p in PYTHON_LESSONS} == set(MODES)
    folders = [p for mode in MODES for p in (ROOT / mode / "src").iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert not folders, "src/ holds the lesson files a user copies; the lab's own parts live elsewhere"


def test_code_lines_leave_out_docstrings_comments_and_blank_lines() -> None:
    text = (
        '"""A lesson.\n\nTwo lines."""\n\nimport os  # a comment\n# only a comment\n\ndef f():\n'
        '    """Doc."""\n    return 1\n'
    )
    assert code_lines(text) == 3  # import, def, return


@pytest.mark.parametrize("path", LESSONS, ids=_name)
def test_a_lesson_file_is_short_enough_to_read_top_to_bottom(path: Path) -> None:
    assert path.suffix in MAX_LINES, f"{_name(path)}: src/ holds lesson files only (.py, .cpp, .h, CMakeLists.txt)"
    text = path.read_text()
    count = code_lines(text) if path.suffix == ".py" else len(text.splitlines())
    assert count <= MAX_LINES[path.suffix]


@pytest.mark.parametrize("path", PYTHON_LESSONS, ids=_name)
def test_a_lesson_file_imports_only_the_tools_it_teaches(path: Path) -> None:
    text = path.read_text()
    assert not IMPORTS_THE_LAB.search(text)
    siblings = {p.stem for p in path.parent.glob("*.py")} - {path.stem}
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    assert not imported & (siblings | {"common", "helpers", "tests"}), "a copied file is alone: no sibling imports"


@pytest.mark.parametrize("path", PYTHON_LESSONS, ids=_name)
def test_a_lesson_file_is_a_tutorial(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert "What you will do" in doc and "What you will learn" in doc
    assert 'if __name__ == "__main__":' in path.read_text()  # importing it starts nothing


def test_no_module_of_common_imports_from_a_mode_folder() -> None:
    """The lab launches lesson files (their paths come from common.modes.lesson_file / lesson_dir); it never
    imports them nor puts a mode's folder on sys.path. Only the workload loader (the user's model folder), the
    start-up hooks and the pyasc stand-in (its own package) change sys.path."""
    may_change_path = {
        "common/workload/loader.py",
        "common/collect/autoprofile/sitecustomize.py",
        "common/bench/proclog/sitecustomize.py",
        "common/modes/ascendc/pyasc_twin/__init__.py",
    }  # its own stand-in package, for in-process tests
    wrong = []
    for path in sorted((ROOT / "common").rglob("*.py")):
        name, tree = _name(path), ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == "src" and name != "common/modes/__init__.py":
                wrong.append(f"{name}:{node.lineno}: a path into a mode's src/ (use common.modes.lesson_file)")
            elif (
                isinstance(node, ast.Attribute)
                and node.attr in ("insert", "append")
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "path"
                and name not in may_change_path
            ):
                wrong.append(f"{name}:{node.lineno}: sys.path changed")
    assert not wrong


MODEL_BLOCK = ("TinyMLP", "load_model", "tensors")  # what a lesson with --model loads its model with
TAKES_A_MODEL = [p for p in PYTHON_LESSONS if '"--model"' in p.read_text()]


def _model_block(path: Path) -> dict[str, str]:
    text = path.read_text()
    return {
        node.name: ast.get_source_segment(text, node)
        for node in ast.parse(text).body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in MODEL_BLOCK
    }


def test_every_lesson_with_a_model_loads_it_with_the_same_block() -> None:
    """TinyMLP, load_model and tensors are one text in every lesson that takes ``--model``: a fix to one is made
    to all (copy the block from any of them)."""
    assert len(TAKES_A_MODEL) == 5, [_name(p) for p in TAKES_A_MODEL]
    blocks = {_name(p): _model_block(p) for p in TAKES_A_MODEL}
    first = blocks[_name(TAKES_A_MODEL[0])]
    assert set(first) == set(MODEL_BLOCK)
    assert [name for name, block in blocks.items() if block != first] == []


def test_the_lessons_tinymlp_is_the_labs() -> None:
    """The block's TinyMLP, weights and input, is the lab's default workload: same module names, same output."""
    import torch

    from common.workload import load_workload

    model, inputs, loss = load_lesson(_name(TAKES_A_MODEL[0])).load_model(None)
    work = load_workload(None)
    lab = work.build_model()
    assert loss is None and [n for n, _ in model.named_parameters()] == [n for n, _ in lab.named_parameters()]
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), lab.state_dict().values()))
    assert [tuple(t.shape) for t in inputs] == [(32, 1024)] and torch.equal(inputs[0], work.inputs()[0])
    with torch.no_grad():
        assert torch.equal(model(*inputs), lab(*work.inputs()))


@pytest.mark.parametrize("path", TAKES_A_MODEL, ids=_name)
def test_a_lesson_shows_what_it_teaches_before_the_model_block(path: Path) -> None:
    """Section 1 is the tool the lesson teaches; the model block, the same in every lesson, comes later."""
    lines = path.read_text().splitlines()
    model = next(i for i, line in enumerate(lines) if line.startswith("class TinyMLP("))
    section = next(line for line in reversed(lines[:model]) if re.match(r"# --- \d+\. ", line))
    assert not section.startswith("# --- 1. "), section
