"""Mode 03's side of ``python -m common precision``: which models its variants built, and each variant's per-op
outputs (``common.collect.precision`` does the reading: ONNX Runtime with every intermediate exposed, or the
ACL dump of the lesson infer.py run once per .om)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from common.analyze.precision import OpOutput
from common.collect.precision import (
    MSACCUCMP,
    acl_dump_config,
    cpu_fp32_note,
    cpu_fp32_ops,
    dump_data_dir,
    dump_op_outputs,
    msaccucmp_convert_argv,
    onnx_op_outputs,
)
from common.errors import LabError
from common.modes import ROOT
from common.modes.pyacl.acl_worker import lesson_argv, run_step, save_inputs
from common.modes.pyacl.variants import BUILD, VARIANTS, ModelFiles, recorded
from common.workload import Workload


def recorded_workload(path: Path) -> dict | None:
    """The workload an ONNX file built by mode 03 records (its metadata), or None."""
    import onnx

    return recorded(onnx.load(str(path), load_external_data=False))


def build_models(work: Workload, device_id: str) -> None:
    """Build 03's variants of the workload as ``nox -s pyacl`` does: ``bash 03_api_pyAcl/build_model.sh all
    [--workload FILE] --device D`` as a program, its output shown. The build keeps files built from the same
    workload, build code and toolchain (its record in .lab_cache: "up to date") and rebuilds anything else."""
    argv = [
        "bash",
        str(ROOT / "03_api_pyAcl" / "build_model.sh"),
        "all",
        *(["--workload", str(Path(work.path).resolve())] if work.path else []),
        "--device",
        device_id,
    ]
    print("$ " + " ".join(argv), flush=True)
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON") or sys.executable}  # the interpreter running this
    code = subprocess.run(argv, env=env, check=False).returncode
    if code != 0:
        raise LabError(
            f"building 03's models for {work.where} failed (build_model.sh exited {code})",
            "read its messages above, or pass --torch-only to compare the torch paths alone",
        )


def mode03_files(work: Workload, npu: bool = False) -> ModelFiles:
    """03's ModelFiles of the workload, with every variant's model (``npu``: the .om) present and built for it;
    else the LabError that says how to build them."""
    files = ModelFiles(work)
    build = BUILD + (" all --device <id>" if npu else "") + (f" --workload {work.path}" if work.path else "")
    paths = [files.model_path(v, npu) for v in VARIANTS.values()]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise LabError(
            f"03's model {missing[0].relative_to(ROOT)} is missing ({len(missing)} variant file(s))",
            f"build them first: {build} (or pass --torch-only)",
        )
    for variant, path in zip(VARIANTS.values(), paths):
        # an .om holds no metadata: build_model.py records its workload beside it
        files.check_record(path, files.read_om_record(variant) if npu else recorded_workload(path))
    return files


def mode03_candidates(work: Workload, leaves: dict[str, str]) -> list[tuple[str, str, str, list[OpOutput], list[str]]]:
    """(name, how, precision, per-op outputs, unmatched lines) of each of 03's variants on ONNX Runtime."""
    import onnx

    files = mode03_files(work)
    out = []
    for variant in VARIANTS.values():
        path = files.portable_path(variant)
        feeds = dict(zip(files.input_names, files.feeds(variant)))
        outputs, unmatched = onnx_op_outputs(path, feeds, leaves, files.onnx)
        island = cpu_fp32_note(cpu_fp32_ops(onnx.load(str(path), load_external_data=False).graph))
        out.append(
            (
                f"03 {variant.name}",
                f"ONNX Runtime on {path.relative_to(ROOT)}: {variant.summary}{island}",
                "fp16" if variant.fp16_compute else "fp32",
                outputs,
                unmatched,
            )
        )
    return out


def mode03_npu_candidates(
    work: Workload, leaves: dict[str, str], device: int, out_dir: Path
) -> list[tuple[str, str, str, list[OpOutput], list[str]]]:
    """(name, how, precision, per-op outputs, unmatched lines) of each of 03's variants on the NPU: the lesson
    infer.py runs the .om once (no warm-up) with the dump block in acl.init's JSON, msaccucmp.py converts the dump
    to .npy. Everything goes to ``out_dir/dump/<variant>/``; CANN's logs to ``out_dir/logs/``."""
    from common.backend import detect, find_cann_home, select_device
    from common.collect import runlogs

    files = mode03_files(work, npu=True)
    cann = find_cann_home()
    msaccucmp = Path(cann or "<CANN install root>") / MSACCUCMP
    if not msaccucmp.is_file():
        raise LabError(
            f"CANN's msaccucmp.py is not at {msaccucmp}",
            "install the CANN toolkit and source its set_env.sh (it sets ASCEND_HOME_PATH), or pass --torch-only",
        )
    env = select_device(detect(), device)
    env.update(runlogs.npu_log_env(env, out_dir))
    out = []
    for variant in VARIANTS.values():
        folder = out_dir / "dump" / variant.name
        raw, npy = folder / "raw", folder / "npy"
        raw.mkdir(parents=True)  # dump_path must exist (ACL-DUMP)
        npy.mkdir()
        om = files.om_path(variant)
        config = folder / "acl.json"
        config.write_text(json.dumps(acl_dump_config(raw.resolve(), om.stem), indent=1))
        inputs = save_inputs(folder / "inputs.npz", files.feeds(variant))
        # A dump keeps every execute's tensors (ACL-DUMP-DATA: dump one inference only): one execute, no warm-up.
        app = lesson_argv(
            om, inputs, folder / "output.npy", device=device, warmup=0, measured=1, extra=("--acl-config", str(config))
        )
        run_step(app, env, "the lesson infer.py (ACL dump)")
        convert = msaccucmp_convert_argv(sys.executable, msaccucmp, dump_data_dir(raw, om.stem), npy)
        run_step(convert, env, "msaccucmp.py convert")
        outputs, unmatched = dump_op_outputs(npy, files.onnx, leaves)
        how = f"the ACL dump of {om.relative_to(ROOT)} (one execute), converted by msaccucmp.py: {variant.summary}"
        out.append((f"03 {variant.name}", how, "fp16" if variant.fp16_compute else "fp32", outputs, unmatched))
    return out
