"""The layers of common/ (DESIGN): formats reads, analyze computes, render lays out, collect and cli drive.

analyze/ imports nothing from collect/ or render/, and no module of common/ imports itself back
through others, whether the import is at the top of a file or inside a function.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import ROOT, code_lines

COMMON = ROOT / "common"


def _module(path: Path) -> str:
    parts = path.relative_to(COMMON.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Module -> the modules of common/ it imports (``from common.x import y`` counts y when y is a module)."""
    modules = {_module(p): p for p in COMMON.rglob("*.py") if "autoprofile" not in p.parts}
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("common.")}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("common"):
                found |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                    for a in node.names
                }
        out[name] = {m for m in found if m in modules and m != name}
    return out


def test_analyze_imports_neither_collect_nor_render() -> None:
    wrong = {
        m: sorted(d for d in deps if d.startswith(("common.collect", "common.render")))
        for m, deps in imports().items()
        if m.startswith("common.analyze")
    }
    assert not {m: d for m, d in wrong.items() if d}


def test_the_verdict_type_lives_below_every_layer() -> None:
    graph = imports()
    assert graph["common.verdict"] == set()
    users = [m for m, deps in graph.items() if "common.analyze.checks" in deps and m.startswith("common.render")]
    assert users == []


def test_no_import_cycle_between_analyze_and_the_layers_it_uses() -> None:
    graph = imports()
    scope = [m for m in graph if m.startswith(("common.analyze", "common.formats", "common.render", "common.verdict"))]
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for dep in sorted(graph[node]):
            if dep in path:
                cycles.append(path[path.index(dep) :] + [dep])
            elif dep in scope and len(path) < 12:
                visit(dep, path + [dep])

    for module in scope:
        visit(module, [module])
    assert not cycles, cycles[:3]


def test_the_modes_harness_is_the_top_layer() -> None:
    """common/modes/ drives the lesson files and may use every layer; below it only the command line (cli/, its
    peer: ``python -m common precision`` runs mode 03's variants) imports it."""
    wrong = {
        m: sorted(d for d in deps if d.startswith("common.modes"))
        for m, deps in imports().items()
        if not m.startswith(("common.modes", "common.cli"))
    }
    assert not {m: d for m, d in wrong.items() if d}


def test_the_command_line_is_the_top_layer() -> None:
    """cli/ (the commands and what each nox session runs) may import every layer; no other module imports it but
    ``python -m common`` and the benchmark, which runs the commands as a user does."""
    wrong = {
        m: sorted(d for d in deps if d.startswith("common.cli"))
        for m, deps in imports().items()
        if not m.startswith(("common.cli", "common.bench")) and m != "common.__main__"
    }
    assert not {m: d for m, d in wrong.items() if d}


def test_the_tests_copy_the_lab_one_way() -> None:
    """helpers.copy_lab is the one copy of the lab the tests make (one ignore list): no other test module copies
    common/ or a mode folder itself."""
    tests = COMMON.parent / "tests"
    copies = [
        p.relative_to(tests).as_posix()
        for p in tests.rglob("*.py")
        if p.name != "helpers.py" and re.search(r"copytree\(\s*(ROOT|MODE)\b", p.read_text())
    ]
    assert copies == []


def test_analyze_takes_records_and_returns_results() -> None:
    """analyze/ opens no file, walks no folder and calls no reader: formats/ reads, the callers pass records in."""
    reading = re.compile(
        r"\bopen\(|\.(r?glob|iterdir|read_text|read_bytes)\(|\bos\.(walk|listdir|scandir)\(|"
        r"\bjson\.load\(|\bnp\.load\(|\bfind_datasets\(|\breaders\.|\bread_[a-z_]+\("
    )
    wrong = [
        f"{p.relative_to(COMMON.parent)}:{n}: {line.strip()}"
        for p in sorted((COMMON / "analyze").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if reading.search(line.split("#")[0]) and not line.lstrip().startswith(('"', "'"))
    ]
    assert not wrong, wrong[:10]


def test_each_module_of_common_holds_one_concern() -> None:
    """No module of common/ over 500 code lines (docstrings, comments and blank lines aside: ``ruff format``'s layout
    is not a concern's size), and at most six loose modules beside the layer folders."""
    long = {
        p.relative_to(COMMON.parent).as_posix(): n
        for p in COMMON.rglob("*.py")
        if (n := code_lines(p.read_text())) > 500
    }
    assert not long
    loose = sorted(p.name for p in COMMON.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(loose) <= 6, loose


LAYER = {
    "verdict": 0,
    "errors": 0,
    "backend": 1,
    "cache": 1,
    "environments": 1,
    "workload": 2,
    "formats": 3,
    "collect": 4,
    "analyze": 4,
    "render": 5,
    "cli": 6,
    "modes": 6,
    "bench": 6,
}


def test_no_module_imports_a_higher_layer() -> None:
    """Each layer imports only those below it: the loose modules, workload/, formats/, then collect/ and analyze/,
    render/, and on top cli/, modes/ and bench/ (the command lines, the modes' harness, the benchmark)."""

    def layer(module: str) -> int:
        parts = module.split(".")
        return LAYER.get(parts[1], 7) if len(parts) > 1 else 7

    wrong = sorted((m, d) for m, deps in imports().items() for d in deps if layer(d) > layer(m))
    assert not wrong


def test_verdicts_are_made_in_analyze_only() -> None:
    """modes/ and cli/ hand what they read to common.analyze (checks/, flops, advisor): they build no Verdict."""
    made = []
    for path in sorted([*(COMMON / "modes").rglob("*.py"), *(COMMON / "cli").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in ("Verdict", "not_applicable"):
                    made.append(f"{path.relative_to(COMMON.parent)}:{node.lineno}: {name}(...)")
    assert made == []
