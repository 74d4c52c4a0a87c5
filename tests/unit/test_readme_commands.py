"""What the pages tell a learner to type, and the files they name, exist in the lab as written.

For every README (the top level, the four modes, workloads/) and every page of docs/:

- each shell command in a fenced block (bash, sh, console, or no language): ``python -m common <command> ...``
  parses with the lab's own parser (placeholders such as ``<dev>``, ``DIR``, ``[--out DIR]`` filled with a
  dummy value first); ``nox -s NAME ...`` names sessions noxfile.py defines, and a mode session's arguments
  parse with the vocabulary those sessions share; ``python3 path/file.py``, ``bash path/run.sh`` and
  ``python -m common.<module>`` name files the lab ships;
- each repository path written in backticks in the prose (``common/modes/pyacl/export.py``, ``src/infer.py``,
  ``common/modes/pyacl/``) exists, from the repository root or from the page's folder, unless a run writes it;
- each relative link leads to a file, and a link to a heading of a page to a heading that page has.

The helpers are tested on deliberately broken commands too, so a check that can no longer fail is noticed.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import MODES, ROOT

from common.cli.commands import command_parser
from common.errors import LabError
from common.cli.sessions import MODE_STEPS, mode_parser


def pages() -> list[str]:
    """The pages a learner reads: every README of the lab and every page of docs/, relative to the root."""
    readmes = ["README.md", *(f"{mode}/README.md" for mode in MODES), "workloads/README.md"]
    return readmes + sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))


# ----- reading a page: fenced blocks, prose, inline code, links, headings ------------------------------------------
SHELL = {"", "bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)\s*$")


@dataclass
class Page:
    path: str
    blocks: list[tuple[str, str]]  # (language, text) of each fenced block, its indentation removed
    prose: str  # the rest, fences and their contents left out

    @property
    def folder(self) -> Path:
        return (ROOT / self.path).parent


def read_page(path: str, text: str | None = None) -> Page:
    text = (ROOT / path).read_text(encoding="utf-8") if text is None else text
    blocks, prose, current, lang, indent = [], [], None, "", ""
    for line in text.splitlines():
        fence = FENCE.match(line)
        if current is None and fence:
            current, indent, lang = [], fence[1], fence[3].lower()
        elif current is not None and fence and not fence[3]:
            blocks.append((lang, "\n".join(current) + "\n"))
            current = None
        elif current is not None:
            current.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
        else:
            prose.append(line)
    return Page(path, blocks, "\n".join(prose))


def inline_code(prose: str) -> list[str]:
    """The text of every inline code span (single or double backticks)."""
    return [m[2] for m in re.finditer(r"(`+)(.+?)\1", prose)]


def links(prose: str) -> list[str]:
    """Every Markdown link target of the prose, outside inline code."""
    bare = re.sub(r"(`+).+?\1", "", prose)
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", bare)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Page) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in page.prose.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading[1])
            found.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return found


# ----- commands in a shell block ------------------------------------------------------------------------------------
PLACEHOLDER = re.compile(r"<[^<>\n]*>")  # <dev>, <free port>, <baseline *_ascend_pt>, PROF_<...>
DUMMY = "1"  # a value every placeholder can take: a device id, a count, a path
WRAPPERS = {"msprof", "time", "timeout", "env", "nohup", "sudo"}  # a command that runs the command after it


def commands(block: str) -> list[list[str]]:
    """The commands of a shell block, each as its argv: continuations joined, prompts and comments removed,
    placeholders filled, one argv per command of a ``&&`` / ``;`` / ``|`` chain."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        line = PLACEHOLDER.sub(DUMMY, line.strip().removeprefix("$ "))
        if not line or line.startswith("#"):
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # a quote left open: prose inside the block, not a command
            continue
        argv: list[str] = []
        for token in [*tokens, ";"]:
            if set(token) <= set(";&|"):
                if argv:
                    found.append(argv)
                argv = []
            else:
                argv.append(token)
    return found


def is_python(token: str) -> bool:
    return re.fullmatch(r"python(3(\.\d+)?)?", Path(token).name) is not None


def program(argv: list[str]) -> list[str]:
    """The argv from the program that runs: ``VAR=value`` settings dropped, and a wrapper (msprof, time ...)
    skipped to the python or bash it starts."""
    while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", argv[0]):
        argv = argv[1:]
    if argv and Path(argv[0]).name in WRAPPERS:
        starts = [i for i, t in enumerate(argv) if is_python(t) or t in ("bash", "sh")]
        return argv[starts[0] :] if starts else []
    return argv


def filled(argv: list[str]) -> list[str]:
    """A synopsis made an argv: ``[--out DIR]`` unbracketed, UPPER-CASE placeholders given the dummy value,
    elisions (``...``) dropped."""
    out = []
    for token in argv:
        token = token.strip("[]")
        if token in ("...", "…", ""):
            continue
        out.append(DUMMY if re.fullmatch(r"[A-Z][A-Z0-9_]*", token) else token)
    return out


def session_names(noxfile: Path) -> set[str]:
    """The sessions noxfile.py defines: every function decorated ``@nox.session`` (``name=`` where given)."""
    names = set()
    for node in ast.walk(ast.parse(noxfile.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            target = call.func if call else deco
            if ast.unparse(target) == "nox.session":
                named = [k.value.value for k in (call.keywords if call else []) if k.arg == "name"]
                names.add(named[0] if named else node.name)
    return names


SESSIONS = session_names(ROOT / "noxfile.py")


def parses(parser_of, argv: list[str]) -> str | None:
    """None when ``argv`` parses, else why not (argparse's exit, or the lab's one-line error)."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            parser_of().parse_args(argv)
    except SystemExit as stop:
        return None if stop.code == 0 else sink.getvalue().strip() or f"exit {stop.code}"
    except LabError as err:
        return str(err)
    return None


def module_file(module: str) -> bool:
    """Whether ``python -m module`` names a module of the lab: a package with __main__.py, or a .py file."""
    path = ROOT.joinpath(*module.split("."))
    return (path / "__main__.py").is_file() or path.with_suffix(".py").is_file()


def script_exists(script: str, folder: Path) -> bool:
    return (ROOT / script).is_file() or (folder / script).is_file()


def command_problems(argv: list[str], folder: Path = ROOT) -> list[str]:
    """What is wrong with one command, as a page writes it (empty when nothing is)."""
    argv = program(argv)
    if not argv:
        return []
    shown = " ".join(argv)
    head = Path(argv[0]).name
    if is_python(head) and len(argv) > 1:
        if argv[1] == "-m" and len(argv) > 2:
            module = argv[2]
            if module == "common":
                why = parses(command_parser, filled(argv[3:]))
                return [f"`{shown}` does not parse: {why}"] if why else []
            if module.split(".")[0] in ("common", "tests") and not module_file(module):
                return [f"`{shown}`: no module {module} in the lab"]
            return []
        return script_problems(argv[1], shown, folder)
    if head in ("bash", "sh") and len(argv) > 1 and not argv[1].startswith("-"):
        return script_problems(argv[1], shown, folder)
    if head == "nox":
        return nox_problems(argv[1:], shown)
    return []


def script_problems(script: str, shown: str, folder: Path) -> list[str]:
    """A script named with a folder must be the lab's. A bare name (``python model.py``) is a lesson file the
    page has just copied into the reader's own folder, and ``path/to/``, ``~`` or ``/`` name the reader's files."""
    if "/" not in script or script.startswith(("path/to/", "~", "/", "$", "..")) or not script.endswith((".py", ".sh")):
        return []
    return [] if script_exists(script, folder) else [f"`{shown}`: {script} does not exist"]


def nox_problems(args: list[str], shown: str) -> list[str]:
    """Every session named after ``-s`` must exist; a mode session's arguments after ``--`` must parse."""
    names, posargs, i = [], None, 0
    while i < len(args):
        if args[i] == "--":
            posargs = args[i + 1 :]
            break
        if args[i] in ("-s", "--session", "--sessions", "-e"):
            i += 1
            while i < len(args) and not args[i].startswith("-"):
                names.append(args[i])
                i += 1
            continue
        i += 1
    problems = [f"`{shown}`: no nox session {name!r} in noxfile.py" for name in names if name not in SESSIONS]
    if posargs is not None and names and all(name in MODE_STEPS for name in names):
        why = parses(lambda: mode_parser(names[0]), filled(posargs))
        if why:
            problems.append(f"`{shown}`: the mode sessions' arguments do not parse: {why}")
    return problems


# ----- repository paths written in the prose ------------------------------------------------------------------------
PATH_SUFFIXES = (".py", ".sh", ".md", ".txt", ".json", ".toml", ".cmake", ".cpp", ".h")
# Produced, not shipped: a run writes these, so a fresh clone holds none of them. A path through one of these
# folders is output the page describes, not a file to find: the modes' outputs, the environments and records, 02's
# build, the top-level bench/ (the benchmark's and the noise harness's output only), nox -s fix's fix_out/ and
# its DDP runs, and the baselines python -m common baseline keeps.
PRODUCED_DIRS = {
    "prof_out",
    "prof_out_ddp",
    "prof_out_dynamic",
    "prof_runs",
    "prof_sweep",
    "agree_out",
    "precision_out",
    ".nox",
    ".lab_cache",
    "build",
    "bench",
    "fix_out",
    "prof_out_fix",
    "baselines",
}
PRODUCED_UNDER = ("03_api_pyAcl/model/",)  # 03's exported and built models, from the root or from 03's folder
# Pages cited from other projects' repositories (mstt's msprobe guide): named by path, not files of this lab.
FOREIGN = {"docs/10.accuracy_compare_PyTorch.md"}


def repo_paths(prose: str) -> list[str]:
    """Words of inline code spans that look like paths of this repository: with a folder, ending in a file type
    the lab ships, or naming one of its folders (``common/modes/pyacl/``)."""
    found = []
    for span in inline_code(prose):
        for word in span.split():
            word = word.strip(",;:()'\"")
            if "/" not in word or re.search(r"[<>*{}$…|=~\[\]]|\.\.\.|://", word) or word.startswith(("/", "../")):
                continue
            if word.endswith(PATH_SUFFIXES) or word.endswith("/"):
                found.append(word)
    return found


def of_the_lab(path: str, folder: Path) -> bool:
    """Whether a path is one the lab ships. Its first folder must be one of the lab's, at the root or beside the
    page (``src/`` in a mode's folder): other first folders are another project's (the pyasc, msOpProf or
    msprof-analyze sources a page cites) or the reader's own (``prof_cfg/``). docs/ holds pages only, so a deeper
    path under it is a cited project's too. A path through what a run writes (PRODUCED_*) is output."""
    parts = path.rstrip("/").split("/")
    if not ((ROOT / parts[0]).is_dir() or (folder / parts[0]).is_dir()) or path in FOREIGN:
        return False
    beside = (folder.relative_to(ROOT) / path).as_posix()
    under = any(p.startswith(PRODUCED_UNDER) for p in (path + "/", beside + "/"))
    return not (parts[0] == "docs" and len(parts) > 2) and not under and not PRODUCED_DIRS.intersection(parts)


def path_problems(page: Page) -> list[str]:
    problems = []
    for path in repo_paths(page.prose):
        if not of_the_lab(path, page.folder):
            continue
        if not ((ROOT / path).exists() or (page.folder / path).exists()):
            problems.append(f"{page.path}: `{path}` does not exist (from the root or from {page.folder.name}/)")
    return problems


def link_problems(page: Page) -> list[str]:
    problems = []
    for target in links(page.prose):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        path = (page.folder / file).resolve() if file else ROOT / page.path
        if not path.exists():
            problems.append(f"{page.path}: link to {target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(read_page(str(path.relative_to(ROOT)))):
            problems.append(f"{page.path}: link to {target}: no such heading in {path.name}")
    return problems


# ----- the tests --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", pages())
def test_every_command_a_page_shows_runs_as_written(path: str) -> None:
    page = read_page(path)
    problems = [
        f"{path}: {p}"
        for lang, text in page.blocks
        if lang in SHELL
        for argv in commands(text)
        for p in command_problems(argv, page.folder)
    ]
    assert problems == []


@pytest.mark.parametrize("path", pages())
def test_every_file_and_link_a_page_names_exists(path: str) -> None:
    page = read_page(path)
    assert path_problems(page) + link_problems(page) == []


def test_the_pages_show_commands_to_check() -> None:
    """The checks above read something: the pages hold commands of each kind they check."""
    shown = [
        program(argv)
        for path in pages()
        for lang, text in read_page(path).blocks
        if lang in SHELL
        for argv in commands(text)
    ]
    heads = {(Path(a[0]).name, a[2] if len(a) > 2 and a[1] == "-m" else "") for a in shown if a}
    assert ("python", "common") in heads and ("nox", "") in heads and ("bash", "") in heads
    assert {"cmdline", "ascendc", "pyacl", "pytorch", "tests"} <= SESSIONS


def problems_of(block: str, folder: Path = ROOT) -> list[str]:
    return [p for argv in commands(block) for p in command_problems(argv, folder)]


@pytest.mark.parametrize(
    "block",
    [
        "python -m common reprot 01_cmdline/prof_out\n",  # a command the CLI does not have
        "python -m common compare <baseline>\n",  # a positional missing
        "python -m common report 01_cmdline/prof_out --soc\n",  # an option without its value
        "python -m common compare A B --samples 1 x\n",  # a value of the wrong type
        "nox -s nosuchsession -- 0\n",
        "nox -s cmdline pytroch -- 0\n",  # one name of several
        "nox -s pyacl -- 0 --workload\n",  # a mode session's option without its value
        "nox -s pytorch -- 0 --kernal pyasc\n",  # an option the mode sessions do not take
        "bash 01_cmdline/runn.sh 0\n",
        "python3 03_api_pyAcl/src/inference.py --om x.om\n",
        "msprof --output=prof_out --task-time=on python3 01_cmdline/src/modle.py --device npu:0\n",
        "bash 02_api_AscendC/build.sh && bash 02_api_AscendC/rn.sh 0\n",  # the second of a chain
        "python -m common.modes.nosuchmode 0\n",
        "python -m common \\\n    cluster\n",  # a continuation line, joined: cluster without its folder
    ],
)
def test_a_broken_command_is_found(block: str) -> None:
    assert problems_of(block), block


@pytest.mark.parametrize(
    "block",
    [
        "python -m common report 01_cmdline/prof_out            # a comment: --no-such-flag\n",
        "python -m common compare <baseline> <candidate> --samples 1 64 --json\n",
        "python -m common precision [dev] [--workload FILE] [--out DIR] [--torch-only] [--cross-check]\n",
        "$ python -m common cluster <dir> --out cluster_out\n",
        "MSPROF_LAB_CACHE=off nox -s cmdline ascendc pyacl pytorch -- 0 --workload my_model.py\n",
        'nox -s tests -- -m "not e2e"\n',
        "bash 02_api_AscendC/build.sh && bash 02_api_AscendC/run.sh 0 --kernel pyasc\n",
        "msprof --output=<out> --task-time=on python3 01_cmdline/src/model.py --device npu:<dev>\n",
        "python3 model.py --model my_model.py\n",  # a copied lesson, in the reader's folder
        "bash 01_cmdline/run.sh 0 -- python3 path/to/your_program.py --its --args\n",
        "python -m common.modes.ascendc\n",
        "lab: python -m common report              0.61     N/A\n",  # output shown in a block, not a command
    ],
)
def test_a_working_command_passes(block: str) -> None:
    assert problems_of(block) == [], block


def test_a_wrong_path_or_link_in_the_prose_is_found() -> None:
    page = read_page(
        "03_api_pyAcl/README.md",
        text=(
            "Read `src/infer.py` and `common/modes/pyacl/export.py`, then `common/modes/pyacl/exporter.py`.\n"
            "The folder `common/modes/nosuch/` and `src/export_onnx.py`; `prof_out/default/report.md` is written,\n"
            "and so are `model/npu/tiny_mlp_default.json` and `03_api_pyAcl/model/tiny_mlp.workload.json`.\n"
            "See [the docs](../docs/no_such_page.md), [own model](../docs/own_model.md#no-such-heading),\n"
            "[the workload file](../docs/own_model.md#the-workload-file) and [NPU](../docs/npu_reference.md).\n"
        ),
    )
    assert path_problems(page) == [
        "03_api_pyAcl/README.md: `common/modes/pyacl/exporter.py` does not exist (from the root or from 03_api_pyAcl/)",
        "03_api_pyAcl/README.md: `common/modes/nosuch/` does not exist (from the root or from 03_api_pyAcl/)",
    ]
    assert link_problems(page) == [
        "03_api_pyAcl/README.md: link to ../docs/no_such_page.md: no such file",
        "03_api_pyAcl/README.md: link to ../docs/own_model.md#no-such-heading: no such heading in own_model.md",
    ]


def test_fences_and_anchors_are_read_as_github_shows_them() -> None:
    page = read_page(
        "x.md",
        text=(
            "# 01 · cmdline — msprof wraps\n## Timing a kernel from Python: `common.collect.profiling`\n"
            "## Figures\n### Figures\n  ```bash\n  bash 01_cmdline/run.sh 0\n  ```\n```text\n# not a heading\n```\n"
        ),
    )
    assert page.blocks == [("bash", "bash 01_cmdline/run.sh 0\n"), ("text", "# not a heading\n")]
    assert anchors(page) == {
        "01--cmdline--msprof-wraps",
        "timing-a-kernel-from-python-commoncollectprofiling",
        "figures",
        "figures-1",
    }


def test_the_top_readme_is_within_its_budget() -> None:
    """The front page says what the lab is, the two set-up commands, the path and where to read on: 150 lines at
    most; every command and flag in detail lives in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


@pytest.mark.parametrize("mode", ["01_cmdline", "02_api_AscendC", "03_api_pyAcl", "04_pyTorch"])
def test_a_mode_readme_leads_with_what_to_run_within_its_budget(mode: str) -> None:
    """A mode README is what to run and what to read: 200 lines at most, the reference in docs/."""
    assert len((ROOT / mode / "README.md").read_text().splitlines()) <= 200
