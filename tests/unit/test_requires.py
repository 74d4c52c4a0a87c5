"""A workload file's REQUIRES: read without importing the file, one-line errors for bad literals, the environment
keyed by the set, built by the lab's builder with torch held at the lab's version (the registry's build of it only
when a package does not import with the lab's), and the one-line import error that names that environment."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT

from common import environments
from common.collect import workload_env
from common.errors import LabError, run_cli
from common.workload import load_workload
from common.workload.requires import declared, environment_dir, normalized

BODY = "import torch\n\ndef build_model():\n    return torch.nn.Linear(4, 2)\n\ndef make_input():\n    return torch.ones(3, 4)\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_requires_is_read_without_running_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '''
        """A model."""
        REQUIRES = ["torchvision==0.28.0", "timm", "transformers[torch] >= 5.0, < 6", "pkg (>=1.0)"]
        import no_such_package_anywhere
        raise SystemExit("never run")
    ''',
    )
    assert declared(path) == ("torchvision==0.28.0", "timm", "transformers[torch] >= 5.0, < 6", "pkg (>=1.0)")
    annotated = write(tmp_path, 'REQUIRES: list[str] = ("timm",)\n')
    assert declared(annotated) == ("timm",)
    assert declared(write(tmp_path, BODY)) == ()
    inside = write(tmp_path, "def f():\n    REQUIRES = ['timm']\n")  # only the top level declares
    assert declared(inside) == ()


BAD = {
    "a string": ('REQUIRES = "timm"\n', "is a str, not a list"),
    "not a literal": ('V = "1.0"\nREQUIRES = [f"timm=={V}"]\n', "is not a literal"),
    "a name": ("REQUIRES = PACKAGES\n", "is not a literal"),
    "a number inside": ('REQUIRES = ["timm", 3]\n', "REQUIRES[1] is a int (3), not a string"),
    "a URL": ('REQUIRES = ["git+https://example.org/x.git"]\n', "REQUIRES[0] = 'git+https://example.org/x.git' is not"),
    "an option": ('REQUIRES = ["--index-url=http://x"]\n', "REQUIRES[0] = '--index-url=http://x' is not"),
    "a path": ('REQUIRES = ["./wheels/x.whl"]\n', "is not a package requirement"),
    "two requirements in one": ('REQUIRES = ["timm torchvision"]\n', "is not a package requirement"),
    "assigned twice": ('REQUIRES = ["timm"]\nREQUIRES = ["torchvision"]\n', "assigned 2 times (lines 1, 2)"),
    "a syntax error": ('REQUIRES = ["timm"\n', "syntax error at line"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_requires_is_one_line(case: str, tmp_path: Path, capsys) -> None:
    text, says = BAD[case]
    path = write(tmp_path, text)
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: declared(path) and 0)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(lines) == 1 and lines[0].startswith(f"Error: workload file {path}")
    assert says in lines[0] and " — " in lines[0], lines[0]


def test_the_environment_is_keyed_by_the_set_however_it_is_written(tmp_path: Path) -> None:
    one = environment_dir(("torchvision==0.28.0", "timm"), tmp_path)
    assert one.parent == tmp_path and one.name.startswith("workload-") and len(one.name) == len("workload-") + 12
    assert environment_dir(("timm", "torchvision == 0.28.0"), tmp_path) == one
    assert environment_dir(("Timm", "TorchVision==0.28.0", "timm"), tmp_path) == one
    assert environment_dir(("timm",), tmp_path) != one
    assert environment_dir(("torchvision==0.29.0", "timm"), tmp_path) != one
    assert normalized(("Foo_Bar.baz[x]>=1",)) == ("foo-bar-baz[x]>=1",)
    assert environment_dir(("timm",)).parent == ROOT / ".nox"  # beside the lab's own environments


def test_pips_conflict_line_is_the_one_reported() -> None:
    pip_says = (
        "Collecting torchvision==0.20.0\n"
        "ERROR: Cannot install torch===2.13.0+cpu and torchvision==0.20.0 because these package versions have "
        "conflicting dependencies.\n\nThe conflict is caused by:\n    torchvision 0.20.0 depends on torch==2.5.0\n"
        "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution\n"
    )
    assert environments._what_failed(pip_says).startswith("ERROR: Cannot install torch===2.13.0+cpu and torchvision")
    assert environments._what_failed("a\nlast words\n") == "last words"


def test_torch_is_held_at_the_labs_build_and_the_registrys_is_taken_only_when_an_import_needs_it(
    tmp_path: Path, monkeypatch
) -> None:
    """The first build pins the lab's torch (2.13.0+cpu); a package whose import fails there (torchvision from the
    registry: operator torchvision::nms does not exist) gets the registry's build of the same version, said in one
    line; a later call finds either stamp and builds nothing."""
    path = write(tmp_path, 'REQUIRES = ["torchvision==0.28.0"]\n' + BODY)
    builds, lines = [], []
    monkeypatch.setattr(workload_env, "environment_dir", lambda requirements: tmp_path / "workload-x")
    monkeypatch.setattr(workload_env, "lab_torch", lambda: "2.13.0+cpu")
    monkeypatch.setattr(workload_env, "is_built", lambda venv, groups, requirements, **kw: requirements in builds[1:])

    def build(venv, groups, *, requirements, verify, keep=False, **kw):
        builds.append(requirements)
        assert keep == (len(builds) == 2)  # the registry's build goes on top of the first: only torch is swapped
        if requirements[-1] == "torch===2.13.0+cpu":
            raise workload_env.ImportFailed(
                "torchvision", "torchvision", "RuntimeError: operator torchvision::nms does not exist", venv
            )
        return venv / "bin" / "python"

    monkeypatch.setattr(workload_env, "ensure_environment", build)
    python = workload_env.ensure(path, log=lines.append)
    assert python == tmp_path / "workload-x" / "bin" / "python"
    assert builds == [("torchvision==0.28.0", "torch===2.13.0+cpu"), ("torchvision==0.28.0", "torch===2.13.0")]
    assert len(lines) == 1 and "torchvision does not import with the lab's torch 2.13.0+cpu" in lines[0]
    assert "registry's torch 2.13.0" in lines[0] and "nms" in lines[0]
    assert workload_env.ensure(path, log=lines.append) == python and len(builds) == 2 and len(lines) == 1
    assert workload_env.ensure(write(tmp_path, BODY)) is None  # no REQUIRES: the lab's own environment


def test_a_torch_without_a_local_build_is_never_swapped(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, 'REQUIRES = ["torchvision==0.28.0"]\n' + BODY)
    monkeypatch.setattr(workload_env, "environment_dir", lambda requirements: tmp_path / "workload-x")
    monkeypatch.setattr(workload_env, "lab_torch", lambda: "2.1.0")
    monkeypatch.setattr(workload_env, "is_built", lambda *a, **kw: False)

    def build(venv, groups, *, requirements, verify, **kw):
        raise workload_env.ImportFailed("torchvision", "torchvision", "ImportError: libc10.so", venv)

    monkeypatch.setattr(workload_env, "ensure_environment", build)
    with pytest.raises(LabError, match=r"`import torchvision` \(torchvision\) fails after its install"):
        workload_env.ensure(path, log=lambda *_: None)


def test_the_import_check_names_the_package_that_fails(tmp_path: Path) -> None:
    """Run for real with this Python: a distribution that imports passes, one whose module fails is named."""
    workload_env.import_check(("pytest",))(Path(sys.executable))
    site = tmp_path / "site"
    (site / "brokenpkg").mkdir(parents=True)
    (site / "brokenpkg" / "__init__.py").write_text("raise RuntimeError('operator brokenpkg::nms does not exist')\n")
    info = site / "brokenpkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenpkg\nVersion: 1.0\n")
    (info / "RECORD").write_text("brokenpkg/__init__.py,,\nbrokenpkg-1.0.dist-info/METADATA,,\n")
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    with pytest.raises(workload_env.ImportFailed) as err:
        workload_env.import_check(("brokenpkg==1.0",))(python)
    assert err.value.package == "brokenpkg" and "operator brokenpkg::nms does not exist" in err.value.error


def test_an_import_error_names_the_environment_that_has_the_packages(tmp_path: Path, capsys) -> None:
    """A mode run directly, under a Python that lacks the file's REQUIRES: one line saying where they are (or how to
    build them); without REQUIRES, how to declare them."""
    path = write(tmp_path, 'REQUIRES = ["no-such-package-xyz==1.0"]\nimport no_such_package_xyz\n' + BODY)
    venv = environment_dir(("no-such-package-xyz==1.0",))
    with pytest.raises(SystemExit):
        run_cli(lambda: load_workload(path) and 0)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "an import failed in this Python" in lines[0] and sys.prefix in lines[0]
    assert f"its REQUIRES are in {venv}, not built yet" in lines[0]
    assert f"nox -s workload -- --workload {path}" in lines[0]
    plain = write(tmp_path, "import no_such_package_xyz\n" + BODY)
    with pytest.raises(SystemExit):
        run_cli(lambda: load_workload(plain) and 0)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "No module named 'no_such_package_xyz'" in lines[0]
    assert 'REQUIRES = ["torchvision==0.28.0"]' in lines[0] and "docs/own_model.md" in lines[0]


def test_an_import_error_with_the_environment_built_says_how_to_use_it(tmp_path: Path, capsys, monkeypatch) -> None:
    path = write(tmp_path, 'REQUIRES = ["no-such-package-xyz==1.0"]\nimport no_such_package_xyz\n' + BODY)
    venv = tmp_path / "nox" / "workload-abc"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    monkeypatch.setattr("common.workload.loader.environment_dir", lambda requirements: venv)
    with pytest.raises(SystemExit):
        run_cli(lambda: load_workload(path) and 0)
    line = capsys.readouterr().err.strip()
    assert f"run it with PYTHON={venv}/bin/python" in line and "nox -s cmdline ascendc pyacl pytorch" in line


@pytest.mark.network
def test_a_real_environment_with_a_small_package(tmp_path: Path) -> None:
    """The builder for real: a venv with a small pure-Python package beside no group, its import checked."""
    venv = tmp_path / "env"
    python = environments.ensure_environment(
        venv, [], requirements=("six",), verify=workload_env.import_check(("six",)), log=lambda *_: None, timeout_s=300
    )
    out = subprocess.run([str(python), "-c", "import six; print(six.__name__)"], capture_output=True, text=True)
    assert out.stdout.strip() == "six"
    assert environments.is_built(venv, [], requirements=("six",))
