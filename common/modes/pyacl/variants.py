"""The three precision variants of this mode, the workload's model files, and what each model is fed.

One table says, per variant, which ATC options build the NPU model, which conversion builds
the portable one, and which dtype its input and output have. ``ModelFiles`` says where the
workload's models live, what their inputs and outputs are called and what they are fed, and
which workload a built file records. Everything else reads these two.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from common import workload as workloads
from common.errors import LabError
from common.formats.engine import np  # numpy on first use: an up-to-date build never needs it
from common.modes import mode_dir
from common.workload import Workload

MODE_DIR = mode_dir("03_api_pyAcl")
MODEL_DIR = MODE_DIR / "model"  # gitignored: everything under it is rebuilt by build_model.sh
PROF_OUT = MODE_DIR / "prof_out"
WARMUP = workloads.WARMUP_FORWARDS  # 3: first executes pay allocation and cache set-up; never measured
MEASURED = workloads.MEASURED_FORWARDS  # 20
RECORD_KEY = "msprof_lab.workload"  # ONNX metadata_props key: the workload a model file was built from
BUILD = "bash 03_api_pyAcl/build_model.sh"


@dataclass(frozen=True)
class Variant:
    name: str
    summary: str
    atc_precision: tuple[str, ...]  # ATC's precision options for this variant
    fp16_compute: bool  # portable: convert the graph's weights and ops to fp16
    io_dtype: str  # "float32" or "float16": what the caller feeds and gets back (floating-point IO)

    @property
    def numpy_io_dtype(self) -> np.dtype:
        return np.dtype(self.io_dtype)

    def atc_options(self, float_inputs: list[str]) -> tuple[str, ...]:
        """The variant's ATC options for a model whose floating-point inputs are ``float_inputs``."""
        if self.io_dtype != "float16":
            return self.atc_precision
        nodes = (f"--input_fp16_nodes={';'.join(float_inputs)}",) if float_inputs else ()  # ATC separates with ;
        return (*self.atc_precision, *nodes, "--output_type=FP16")


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
            (),  # + --input_fp16_nodes=<every floating-point input> --output_type=FP16
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
        raise LabError(f"unknown variant {text!r}", f"choose one of {', '.join(VARIANTS)} or all")
    return [VARIANTS[value]]


def slug(name: str) -> str:
    """A file-name stem from a workload name: TinyMLP -> tiny_mlp, my model -> my_model."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return re.sub(r"[^a-z0-9_-]+", "_", snake).strip("_") or "model"


@dataclass(frozen=True, eq=False)
class ModelFiles:
    """One workload's model files, its IO names and shapes, and the arrays each variant feeds."""

    workload: Workload

    @functools.cached_property
    def stem(self) -> str:
        return slug(self.workload.name)

    @property
    def onnx(self) -> Path:
        """The fp32 export every variant starts from."""
        return MODEL_DIR / f"{self.stem}.onnx"

    def om_stem(self, variant: Variant) -> Path:
        """atc's --output takes the path without ``.om``; it appends the suffix itself."""
        return MODEL_DIR / "npu" / f"{self.stem}_{variant.name}"

    def om_path(self, variant: Variant) -> Path:
        return self.om_stem(variant).with_suffix(".om")

    def om_json_path(self, variant: Variant) -> Path:
        """The om graph dumped to JSON by ``atc --mode=1``, to count its ops by type."""
        return self.om_stem(variant).with_suffix(".json")

    def om_record_path(self, variant: Variant) -> Path:
        """Beside the .om (ATC writes no metadata of ours into it): the workload it was built from."""
        return self.om_stem(variant).with_suffix(".workload.json")

    def portable_path(self, variant: Variant) -> Path:
        return MODEL_DIR / "portable" / f"{self.stem}_{variant.name}.opt.onnx"

    def model_path(self, variant: Variant, npu: bool) -> Path:
        return self.om_path(variant) if npu else self.portable_path(variant)

    # ----- IO ------------------------------------------------------------------------------------
    @functools.cached_property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The workload's inputs as numpy arrays, in the order forward() takes them (floating-point ones in
        fp32: the exported graph is fp32, see Workload.fp32_copy)."""
        return self.workload.fp32_input_arrays()

    @functools.cached_property
    def input_names(self) -> list[str]:
        """forward()'s parameter names when it names one per input (x for TinyMLP), else input_0, input_1 ..."""
        names = self.workload.forward_parameters()
        n = len(self.arrays)
        return names[:n] if len(names) >= n else [f"input_{i}" for i in range(n)]

    @functools.cached_property
    def output_names(self) -> list[str]:
        """y for one output, y0, y1 ... for several (prefixed if an input already has the name)."""
        n = len(self.workload._reference_arrays())
        names = ["y"] if n == 1 else [f"y{i}" for i in range(n)]
        return [f"out_{name}" if name in self.input_names else name for name in names]

    @property
    def input_shapes(self) -> dict[str, list[int]]:
        return {name: list(a.shape) for name, a in zip(self.input_names, self.arrays)}

    @property
    def float_inputs(self) -> list[str]:
        return [name for name, a in zip(self.input_names, self.arrays) if np.issubdtype(a.dtype, np.floating)]

    def atc_input_shape(self) -> str:
        """atc --input_shape for every input: ``x:32,1024`` or ``a:8,16;b:8,4``."""
        return ";".join(f"{name}:{','.join(map(str, dims))}" for name, dims in self.input_shapes.items())

    def feeds(self, variant: Variant) -> list[np.ndarray]:
        """Every input, floating-point ones in the variant's IO dtype (fp16-io: the caller converts)."""
        return [a.astype(variant.numpy_io_dtype) if np.issubdtype(a.dtype, np.floating) else a for a in self.arrays]

    # ----- which workload a built file belongs to ------------------------------------------------
    def record(self) -> dict:
        return {"name": self.workload.name, "sha256": self.workload.sha256}

    def check_record(self, path: Path, recorded: dict | None) -> None:
        """A built file must record this workload; one built for another is refused before anything runs."""
        rebuild = f"rebuild it: {BUILD}" + (f" --workload {self.workload.path}" if self.workload.path else "")
        if not isinstance(recorded, dict) or not {"name", "sha256"} <= set(recorded):
            raise LabError(f"{path} does not record the workload it was built from", rebuild)
        if recorded["sha256"] != self.workload.sha256:
            raise LabError(
                f"{path} was built for workload {recorded['name']} (sha256 {str(recorded['sha256'])[:12]}), "
                f"this run profiles {self.workload.name} (sha256 {self.workload.sha256[:12]})",
                rebuild,
            )

    def write_om_record(self, variant: Variant) -> None:
        self.om_record_path(variant).write_text(json.dumps(self.record(), indent=1) + "\n")

    def read_om_record(self, variant: Variant) -> dict | None:
        try:
            return json.loads(self.om_record_path(variant).read_text())
        except (OSError, ValueError):
            return None


def metadata_value(model, key: str):
    """The JSON value a loaded ONNX model keeps under ``key`` in its metadata_props, or None."""
    for prop in model.metadata_props:
        if prop.key == key:
            try:
                return json.loads(prop.value)
            except ValueError:
                return None
    return None


def recorded(model) -> dict | None:
    """The workload a loaded ONNX model records (export_onnx.stamp wrote it), or None."""
    return metadata_value(model, RECORD_KEY)


def check_feed(feed: np.ndarray, shape: list, dtype: str, where: str) -> None:
    """An array fed must match the model's input exactly; ORT and ACL would fail less clearly."""
    if list(feed.shape) != list(shape) or feed.dtype != np.dtype(dtype):
        raise LabError(
            f"{where} takes {dtype}{list(shape)}, the input is {feed.dtype}{list(feed.shape)}",
            f"feed the workload's make_input() in the variant's dtype, or rebuild the model: {BUILD}",
        )
