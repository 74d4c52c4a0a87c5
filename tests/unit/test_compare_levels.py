"""compare across export levels of one workload (real msinsight captures), and its refusal of different compute."""

from __future__ import annotations

import pytest
from helpers import FIXTURES

from common.analyze.compare import compare
from common.formats.run_ops import load_side
from common.errors import LabError

NPU = FIXTURES / "npu"
LEVEL0 = NPU / "msinsight_torch_npu" / "text_level0" / "rank0_ascend_pt"
LEVEL1 = NPU / "msinsight_torch_npu" / "text_level1" / "rank0_ascend_pt"


def test_level0_and_level1_of_one_workload_compare_by_family() -> None:
    """Level0 has kernel names and no OP Type: by (OP Type, shapes) 0% matched; by family the same CNN.
    Before: refused as 'not the same workload: 0%'."""
    cmp = compare(load_side(LEVEL0), load_side(LEVEL1), 10.0)
    assert cmp.matched_by == "family"
    rows = {d.key[1]: (d.base_us, d.cand_us) for d in cmp.ops}
    assert rows["conv"] == (pytest.approx(1803.6, abs=0.05), pytest.approx(1808.5, abs=0.05))
    assert rows["communication"] == (pytest.approx(85516.9, abs=0.05), pytest.approx(105991.9, abs=0.05))
    # the compute agrees within 10% per family; the one regression is the all-reduce's waiting
    assert [d.key[1] for d in cmp.regressions] == ["communication"]


def test_different_models_are_still_refused() -> None:
    """The CNN against the GPT-style capture. Before: their all-reduce ([N/A] shapes on both) counted as a match
    covering most of the CNN's time, and the two were compared op by op."""
    with pytest.raises(LabError, match=r"cover 0% of the baseline's time \(need 50%\)"):
        compare(load_side(LEVEL1), load_side(NPU / "torch_npu_aicpu_kernel_details"), 10.0)
    # a Level0 side is matched by family only when the families' mix agrees; the GPT's does not
    with pytest.raises(LabError, match=r"cover 0% of the baseline's time; the compute families' shares overlap 19%"):
        compare(load_side(LEVEL0), load_side(NPU / "torch_npu_aicpu_kernel_details"), 10.0)
