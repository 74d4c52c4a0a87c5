"""A lab-made fp16 variant never fails a correct model for a range fp16 cannot represent: the output check says
the variant's limit, with the numbers, and still fails a wrong output that fp16 could represent."""

from __future__ import annotations

import pytest

from common.analyze.checks import check_output
from common.analyze.checks.variants import FP16_MAX, FP16_SMALLEST_NORMAL, fp16_range

GOOD = {"max_abs_diff": 1e-7, "mean_abs_diff": 1e-8, "cosine": 1.0}
ZEROED = {"max_abs_diff": 8e-10, "mean_abs_diff": 4e-10, "cosine": 0.0}  # fp16 rounded every value to 0


@pytest.mark.parametrize(
    "scale, says",
    [(8e-10, "below fp16's smallest normal number"), (0.0, "below"), (1e6, "above fp16's largest number 65504")],
)
def test_outside_fp16s_normal_range_is_named(scale: float, says: str) -> None:
    assert says in fp16_range(scale)


@pytest.mark.parametrize("scale", [FP16_SMALLEST_NORMAL, 0.1, 1.0, FP16_MAX])
def test_inside_fp16s_normal_range_is_not_a_limit(scale: float) -> None:
    assert fp16_range(scale) is None


def test_a_failure_the_range_explains_is_not_applicable_with_its_numbers() -> None:
    v = check_output({**ZEROED, "fp16_range": fp16_range(8e-10)}, "fp16-io", 1e-5, 0.999)
    assert v.ok and not v.applicable
    assert "cannot represent the output" in v.detail and "cosine 0.000000 (min 0.999)" in v.detail


def test_a_pass_stays_a_pass_and_a_failure_in_range_stays_a_failure() -> None:
    assert check_output({**GOOD, "fp16_range": fp16_range(8e-10)}, "default", 1e-5, 0.999).applicable
    v = check_output(ZEROED, "fp16-io", 1e-5, 0.999)
    assert not v.ok and v.applicable
