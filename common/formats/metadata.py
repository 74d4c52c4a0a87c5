"""A rank's parallel layout as torch_npu records it: ``distributed_args`` and ``parallel_group_info``.

torch_npu writes the profiler's metadata into ``{worker}_{ts}_ascend_pt/profiler_metadata.json``
(a text export) and into the ``META_DATA`` table (``name``, ``value``: one JSON text per key) of
``ascend_pytorch_profiler_<rank>.db`` (a database export). Two keys describe the layout:

- ``distributed_args`` (written by Megatron-style frameworks through ``add_metadata_json``):
  ``tensor_model_parallel_size``, ``pipeline_model_parallel_size``, ``data_parallel_size``,
  ``context_parallel_size``, ``expert_model_parallel_size``, ``rank``, ``world_size``;
- ``parallel_group_info`` (torch_npu 2.5 and later): per process group of this rank,
  ``{"<group id>": {"group_name": "tp" | "pp" | "dp" | ..., "group_rank": <its index>,
  "global_ranks": [...]}}``.

Both are optional: a capture without them has no layout, and the readers return None.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import LabError
from common.formats.sqlite_file import SqliteFile

PROFILER_METADATA_JSON = "profiler_metadata.json"
LAYOUT_KEYS = ("distributed_args", "parallel_group_info")


@dataclass(frozen=True)
class GroupInfo:
    """One process group of one rank, as parallel_group_info names it."""

    group_id: str  # the key: "group_name_19" (torch_npu's group name) or "<ip>%<nic>_<port>_..."
    name: str  # Megatron's name for it: tp, pp, dp, dp_cp, cp, exp, mp, embd, default_group ...
    group_rank: int  # this rank's index in global_ranks
    global_ranks: tuple[int, ...]


@dataclass(frozen=True)
class RankMetadata:
    """What one rank recorded of its layout (either part may be missing)."""

    source: str  # the file or table it came from
    distributed_args: dict | None
    groups: tuple[GroupInfo, ...]


def _decode(value: object, where: str) -> object:
    """META_DATA holds JSON text; profiler_metadata.json holds the objects themselves."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise LabError(f"{where}: not JSON ({err})", "the metadata is damaged; export the profile again") from None
    return value


def _layout(values: dict, source: str) -> RankMetadata | None:
    if not any(k in values for k in LAYOUT_KEYS):
        return None
    args = _decode(values.get("distributed_args"), f"{source} distributed_args")
    info = _decode(values.get("parallel_group_info"), f"{source} parallel_group_info") or {}
    if not isinstance(info, dict) or (args is not None and not isinstance(args, dict)):
        raise LabError(
            f"{source}: distributed_args / parallel_group_info are not JSON objects",
            "the metadata is damaged, or from a torch_npu this lab does not read",
        )
    groups = []
    for group_id, group in info.items():
        try:
            groups.append(
                GroupInfo(
                    str(group_id),
                    str(group["group_name"]),
                    int(group["group_rank"]),
                    tuple(int(r) for r in group["global_ranks"]),
                )
            )
        except (KeyError, TypeError, ValueError):
            raise LabError(
                f"{source}: parallel_group_info {group_id!r} has no group_name / group_rank / global_ranks ({group!r})",
                "the metadata is damaged, or from another torch_npu",
            ) from None
    return RankMetadata(source, args, tuple(groups))


def read_rank_metadata(rank_folder: Path, profiler_db: Path | None = None) -> RankMetadata | None:
    """The layout of one rank: its profiler_metadata.json, else its database's META_DATA; None without one."""
    path = Path(rank_folder) / PROFILER_METADATA_JSON
    if path.is_file():
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise LabError(
                f"{path}: unreadable ({err})", "the file is damaged or cut short; copy the profile again"
            ) from None
        return _layout(values, str(path)) if isinstance(values, dict) else None
    if profiler_db is not None:
        db = SqliteFile(profiler_db, "torch_npu (profiler database)")
        if db.has("META_DATA", "name", "value"):
            names = ", ".join("?" * len(LAYOUT_KEYS))
            rows = db.query(f"SELECT name, value FROM META_DATA WHERE name IN ({names})", LAYOUT_KEYS)
            return _layout(dict(rows), f"{profiler_db} META_DATA")
    return None


# Megatron names its process groups; these are the ones that say how the ranks split the work. A rank's DP group is
# "dp" (torch_npu records "dp_cp" only, on some ranks, when context parallel size is 1: the same ranks).
LAYOUT_KINDS = {"TP": ("tp",), "PP": ("pp",), "DP": ("dp", "dp_cp"), "CP": ("cp",), "EP": ("exp", "ep")}


@dataclass
class LayoutRecord:
    """What a capture's ranks recorded of their parallel layout, added up rank by rank (in rank order) so that a
    capture of any size keeps only its distinct groups: for each group a rank names under :data:`LAYOUT_KINDS`
    (the first of a kind's names the rank has), ``(kind, its global ranks) -> (name, group id)`` as first met;
    the first ``distributed_args`` recorded and the first rank's source; the ranks that recorded nothing."""

    groups: dict[tuple[str, tuple[int, ...]], tuple[str, str]] = field(default_factory=dict)
    args: dict | None = None
    source: str | None = None
    missing: array = field(default_factory=lambda: array("q"))  # ranks without a layout, 8 bytes each

    def add(self, rank: int, meta: RankMetadata | None) -> None:
        if meta is None:
            self.missing.append(rank)
            return
        if self.source is None:
            self.source = meta.source
        if not self.args and meta.distributed_args:
            self.args = meta.distributed_args
        by_name = {g.name: g for g in meta.groups}
        for kind, names in LAYOUT_KINDS.items():
            mine = next((by_name[n] for n in names if n in by_name), None)
            if mine is not None:
                self.groups.setdefault((kind, mine.global_ranks), (mine.name, mine.group_id))

    def merge(self, other: LayoutRecord) -> None:
        """Add a later chunk's ranks."""
        if self.source is None:
            self.source = other.source
        if not self.args and other.args:
            self.args = other.args
        for key, value in other.groups.items():
            self.groups.setdefault(key, value)
        self.missing += other.missing

    @property
    def recorded(self) -> bool:
        return self.source is not None
