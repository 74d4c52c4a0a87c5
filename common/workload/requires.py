"""The packages a workload file declares: ``REQUIRES = ["torchvision==0.28.0", "timm"]`` at its top level.

Read without importing the file (its imports fail until they are installed): the file is parsed
and the assignment's value taken as a literal. Each item is a pip requirement string naming a
package from a registry (name, extras, version specifiers); URLs, paths and pip options are
refused. The lab installs a set into an environment of its own, ``.nox/workload-<key>``
(common/collect/workload_env.py), kept between runs and keyed by the set, whatever order and
spacing it is written in.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from common.errors import LabError

NAME = "REQUIRES"
NOX_DIR = Path(__file__).resolve().parents[2] / ".nox"  # beside the lab's own environments
ENV_PREFIX = "workload-"
KEY_CHARS = 12  # of the set's sha256: the environment's folder name
_VERSION = r"[A-Za-z0-9.*+!_-]+"
_SPEC = rf"(===|==|!=|~=|<=|>=|<|>)\s*{_VERSION}"
REQUIREMENT = re.compile(  # PEP 508's name, extras and version specifiers; no URL, path, marker or option
    rf"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\s*(?:\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?"
    rf"\s*(?:\(?\s*{_SPEC}(?:\s*,\s*{_SPEC})*\s*\)?)?"
)
_HOW = 'write REQUIRES = ["torchvision==0.28.0", "timm"]: a list of pip requirement strings (docs/own_model.md)'


def declared(file: Path) -> tuple[str, ...]:
    """The requirements ``file`` declares in ``REQUIRES`` (empty when it declares none), each checked."""
    try:
        tree = ast.parse(Path(file).read_bytes(), str(file))
    except SyntaxError as err:
        raise LabError(
            f"workload file {file}: syntax error at line {err.lineno}: {err.msg}", "fix the Python syntax in that file"
        ) from None
    found = [node for node in tree.body if _assigns_requires(node)]
    if not found:
        return ()
    if len(found) > 1:
        raise LabError(
            f"workload file {file}: {NAME} is assigned {len(found)} times (lines "
            f"{', '.join(str(n.lineno) for n in found)})",
            f"keep one; {_HOW}",
        )
    node = found[0]
    where = f"workload file {file}, line {node.lineno}"
    try:
        value = ast.literal_eval(node.value)
    except ValueError:
        raise LabError(
            f"{where}: {NAME} is not a literal (the lab reads it without running the file)",
            f"{_HOW}, written out, with no names, calls or f-strings",
        ) from None
    if not isinstance(value, (list, tuple)):
        raise LabError(f"{where}: {NAME} is a {type(value).__name__}, not a list", _HOW)
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise LabError(f"{where}: {NAME}[{i}] is a {type(item).__name__} ({item!r}), not a string", _HOW)
        if not REQUIREMENT.fullmatch(item.strip()):
            raise LabError(
                f"{where}: {NAME}[{i}] = {item!r} is not a package requirement",
                "name a package of the registry with optional [extras] and version specifiers, e.g. "
                '"torchvision==0.28.0" (no URLs, paths, markers or pip options)',
            )
        out.append(item.strip())
    return tuple(out)


def _assigns_requires(node: ast.stmt) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == NAME for t in node.targets)
    return (
        isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == NAME
        and node.value is not None
    )


def normalized(requirements: tuple[str, ...]) -> tuple[str, ...]:
    """The set in one spelling: without spaces, names lower-case with ``-`` for ``_``/``.``, sorted, once each."""

    def one(req: str) -> str:
        req = re.sub(r"\s+", "", req)
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
        return re.sub(r"[-_.]+", "-", name).lower() + req[len(name) :]

    return tuple(sorted({one(r) for r in requirements}))


def environment_dir(requirements: tuple[str, ...], nox_dir: Path = NOX_DIR) -> Path:
    """Where the lab keeps the environment of this set: ``<nox_dir>/workload-<key>``."""
    key = hashlib.sha256("\n".join(normalized(requirements)).encode()).hexdigest()[:KEY_CHARS]
    return nox_dir / f"{ENV_PREFIX}{key}"
