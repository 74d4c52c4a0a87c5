"""msprobe's compare_result_*.csv read and matched with the lab's per-op table (``precision --cross-check``).

The CSV here is hand-made in the real column layout of mindstudio-probe 26.2.0's ``msprobe compare`` (the header taken
from a real run on TinyMLP); the run itself is tests/modes/test_precision_msprobe.py (marker ``network``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from helpers import laid_out

from common.analyze.msprobe_check import COSINE_AGREE, cross_check, lab_path
from common.analyze.precision import FP16, OpOutput, compare_ops
from common.errors import LabError
from common.formats.msprobe_compare import compare_result_file, read_compare_result
from common.render.precision import cross_check_sections
from common.render.report import Report

HEADER = (
    "NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,NPU Requires_grad,"
    "Bench Requires_grad,Cosine,EucDist,MaxAbsErr,MaxRelativeErr,One Thousandth Err Ratio,"
    "Five Thousandths Err Ratio,NPU max,NPU min,NPU mean,NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,"
    "Requires_grad Consistent,Result,Err_message,NPU_Stack_Info,Data_name"
)
DTYPES = '"[""error: The dtype of NPU and Bench are inconsistent.""]"'


def _row(name: str, cosine: str, max_abs: str) -> str:
    return (
        f'{name},{name},torch.float16,torch.float32,"[2, 2]","[2, 2]",False,False,{cosine},0.1,{max_abs},0.5,'
        f"1.0,1.0,1,0,0.5,1,1,0,0.5,1,True,error,{DTYPES},\"['File x.py, line 1']\",{name}.pt"
    )


def _csv(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "compare_result_proc1_20261203075604.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def _lab(outputs: dict[str, float]) -> object:
    """A torch fp16 result whose op ``p`` has candidate ``[1, 1 + e]`` against the reference ``[1, 1]``."""
    ops = [OpOutput(p, "X()", np.array([1.0, 1.0 + e])) for p, e in outputs.items()]
    return compare_ops("torch fp16", "how", FP16, ops, {p: np.ones(2) for p in outputs})


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("Module.net.0.Linear.forward.0.output.0", ("net.0", "output", "0")),
        ("Module.blocks.0.attn.proj.Linear.forward.1.output.0", ("blocks.0.attn.proj#2", "output", "0")),
        ("Module.net.0.Linear.forward.0.parameters.weight", ("net.0", "parameters", "weight")),
        ("Module.net.0.Linear.backward.0.output.0", None),
        ("Torch.matmul.0.forward.output.0", None),
    ],
)
def test_msprobe_module_names_map_to_the_labs_module_paths(name: str, found: tuple | None) -> None:
    assert lab_path(name) == found


def test_the_compare_csv_is_read_with_its_metrics_and_words_as_nan(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        [
            _row("Module.net.0.Linear.forward.0.output.0", "0.999871", "0.001094341278"),
            _row("Module.net.1.GELU.forward.0.output.0", "N/A", "unsupported"),
        ],
    )
    assert compare_result_file(tmp_path) == path  # the file msprobe wrote is the one found
    rows = read_compare_result(path)
    assert [r.name for r in rows] == ["Module.net.0.Linear.forward.0.output.0", "Module.net.1.GELU.forward.0.output.0"]
    assert (rows[0].cosine, rows[0].max_abs_err) == (0.999871, 0.001094341278)
    assert "dtype of NPU and Bench are inconsistent" in rows[0].message
    assert math.isnan(rows[1].cosine) and math.isnan(rows[1].max_abs_err)


def test_a_csv_without_msprobes_columns_or_no_csv_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="compare_result_"):
        compare_result_file(tmp_path)
    (tmp_path / "compare_result_x.csv").write_text("Name,Cos\na,1\n")
    with pytest.raises(LabError, match="no column 'NPU Name'"):
        read_compare_result(tmp_path / "compare_result_x.csv")


def test_the_labs_table_and_msprobes_agree_module_by_module_and_say_what_only_one_reports(tmp_path: Path) -> None:
    lab = _lab({"net.0": 0.5, "net.1": 0.25, "head": 0.0})
    cos0 = lab.rows[0].cosine
    probe = read_compare_result(
        _csv(
            tmp_path,
            [
                _row("Module.net.0.Linear.forward.0.input.0", "1.0", "0.0"),
                _row("Module.net.0.Linear.forward.0.output.0", f"{cos0:.6f}", "0.5"),
                _row("Module.net.1.GELU.forward.0.output.0", f"{lab.rows[1].cosine:.6f}", "0.25"),
                _row("Module.net.Sequential.forward.0.output.0", "1.0", "0.25"),
            ],
        )
    )
    check = cross_check(lab, probe)
    assert [(r.path, r.probe_name) for r in check.rows] == [
        ("net.0", "Module.net.0.Linear.forward.0.output.0"),
        ("net.1", "Module.net.1.GELU.forward.0.output.0"),
    ]
    assert check.agree
    assert check.lab_only == ["head"]
    assert check.probe_only == ["Module.net.Sequential.forward.0.output.0"]
    assert check.not_compared == 1  # the input row
    text, markdown, page = laid_out(Report("precision", cross_check_sections(check, "how it ran")))
    table_at, verdict_at = text.index("msprobe's name"), text.index("the lab and msprobe agree on 2 modules")
    assert text.index("how it ran") < table_at < verdict_at  # the table, then where they differ and the verdict
    assert "| net.0 | Module.net.0.Linear.forward.0.output.0 |" in markdown and "<h2>Cross-check: " in page


@pytest.mark.parametrize(
    ("cosine_off", "abs_err", "why"),
    [(3 * COSINE_AGREE, "0.5", "cosine differs"), (0.0, "0.51", "max abs err differs")],
)
def test_a_metric_beyond_its_tolerance_is_a_disagreement(
    tmp_path: Path, cosine_off: float, abs_err: str, why: str
) -> None:
    lab = _lab({"net.0": 0.5})
    probe = read_compare_result(
        _csv(
            tmp_path,
            [_row("Module.net.0.Linear.forward.0.output.0", f"{lab.rows[0].cosine - cosine_off:.6f}", abs_err)],
        )
    )
    check = cross_check(lab, probe)
    assert not check.agree
    assert why in check.rows[0].why
