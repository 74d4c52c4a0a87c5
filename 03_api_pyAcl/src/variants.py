"""The three precision variants of this mode, where each one's model file lives, and what it is fed.

One table says, per variant, which ATC options build the NPU model, which conversion builds
the portable one, and which dtype its input and output have. Everything else reads this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common import workload
from common.errors import LabError

MODE_DIR = Path(__file__).resolve().parent.parent  # 03_api_pyAcl/
MODEL_DIR = MODE_DIR / "model"  # gitignored: everything under it is rebuilt by build_model.sh
PROF_OUT = MODE_DIR / "prof_out"
ONNX_MODEL = MODEL_DIR / "tiny_mlp.onnx"  # the fp32 export every variant starts from
INPUT_NAME = "x"
OUTPUT_NAME = "y"
WARMUP = workload.WARMUP_FORWARDS  # 3: first executes pay allocation and cache set-up; never measured
MEASURED = workload.MEASURED_FORWARDS  # 20


@dataclass(frozen=True)
class Variant:
    name: str
    summary: str
    atc_options: tuple[str, ...]  # added to the base atc argv on the npu backend
    fp16_compute: bool  # portable: convert the graph's weights and ops to fp16
    io_dtype: str  # "float32" or "float16": what the caller feeds and gets back

    @property
    def numpy_io_dtype(self) -> np.dtype:
        return np.dtype(self.io_dtype)

    def om_stem(self) -> Path:
        """atc's --output takes the path without ``.om``; it appends the suffix itself."""
        return MODEL_DIR / "npu" / f"tiny_mlp_{self.name}"

    def om_path(self) -> Path:
        return self.om_stem().with_suffix(".om")

    def om_json_path(self) -> Path:
        """The om graph dumped to JSON by ``atc --mode=1``, to count its ops by type."""
        return self.om_stem().with_suffix(".json")

    def portable_path(self) -> Path:
        return MODEL_DIR / "portable" / f"tiny_mlp_{self.name}.opt.onnx"

    def model_path(self, npu: bool) -> Path:
        return self.om_path() if npu else self.portable_path()


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "default",
            "ATC's default precision policy: compute in fp16, model IO stays fp32 (Cast ops at the boundary)",
            (),  # --precision_mode=force_fp16 is the default, so nothing is added
            fp16_compute=True,
            io_dtype="float32",
        ),
        Variant(
            "fp16-io",
            "fp16 compute and fp16 IO: the caller converts, so the model needs no boundary Cast",
            (f"--input_fp16_nodes={INPUT_NAME}", "--output_type=FP16"),
            fp16_compute=True,
            io_dtype="float16",
        ),
        Variant(
            "fp32",
            "the model's own dtype kept (must_keep_origin_dtype): fp32 compute and IO, no Cast, reference accuracy",
            # force_fp32 would not do: for cube ops (MatMul) it equals cube_fp16in_fp32out, i.e. fp16 inputs.
            ("--precision_mode=must_keep_origin_dtype",),
            fp16_compute=False,
            io_dtype="float32",
        ),
    )
}


def parse_variants(text: str) -> list[Variant]:
    """``all`` or one name from the allow-list; anything else is a usage error."""
    value = text.strip()
    if value == "all":
        return list(VARIANTS.values())
    if value not in VARIANTS:
        raise LabError(
            f"unknown variant {text!r}",
            f"choose one of {', '.join(VARIANTS)} or all",
        )
    return [VARIANTS[value]]


def make_feed(variant: Variant) -> np.ndarray:
    """The shared input, in the dtype the variant's model takes (fp16-io: the caller converts)."""
    return workload.make_input().numpy().astype(variant.numpy_io_dtype)


def check_feed(feed: np.ndarray, shape: list, dtype: str, where: str) -> None:
    """The array fed must match the model's input exactly; ORT and ACL would fail less clearly."""
    if list(feed.shape) != list(shape) or feed.dtype != np.dtype(dtype):
        raise LabError(
            f"{where} takes {dtype}{list(shape)}, the input is {feed.dtype}{list(feed.shape)}",
            "feed common.workload.make_input() in the variant's dtype, or rebuild the model",
        )
