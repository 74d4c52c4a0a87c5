"""A model's output against its reference, one rule for every mode and for agree; a program that verifies its own
output; training losses with and without the profiler."""

from __future__ import annotations


from common.errors import LabError
from common.formats.engine import np
from common.formats.outputs import SavedOutput
from common.verdict import Verdict, not_applicable
from common.workload import Expected, compare_outputs


# The output tolerance, one rule for every mode and for agree: max |output - reference| within a share
# of the reference's largest value (its scale), plus a floor for outputs near zero.
# Portable backend: the mode runs the same CPU kernels on the same thread count as the reference, so
# the outputs match bit for bit; 1e-5 of the scale still fails a model whose output drifts by 2e-4.
# NPU (estimates, not measured here): fp32 MatMuls differ from the CPU by accumulation order (~1e-6),
# but torch_npu runs fp32 convolutions in HF32 by default (torch.npu.conv.allow_hf32), ~1e-3 relative;
# fp16 keeps 11 significant bits (~1e-3 per op, growing with depth), bf16 8 bits.
OUTPUT_RTOL = {("portable", None): 1e-5, ("npu", "fp32"): 2e-3, ("npu", "fp16"): 2e-2, ("npu", "bf16"): 6e-2}
OUTPUT_ATOL = 1e-6
COSINE_MIN = {"portable": 0.99999, "npu": 0.999}


def check_output(metrics: dict[str, float] | None, where: str, max_abs_tol: float, cosine_min: float) -> Verdict:
    """The model's output matches the reference within the given tolerances (None: nothing recorded)."""
    if not metrics:
        return Verdict(f"output matches fp32 reference ({where})", False, "run_info.json has no accuracy")
    measured = (
        f"max abs diff {metrics['max_abs_diff']:.3g} (tol {max_abs_tol:g}), mean abs diff "
        f"{metrics['mean_abs_diff']:.3g}, cosine {metrics['cosine']:.6f} (min {cosine_min})"
    )
    ok = metrics["max_abs_diff"] <= max_abs_tol and metrics["cosine"] >= cosine_min
    if not ok and metrics.get("fp16_range"):  # a lab-made fp16 variant cannot hold this output: its limit, not an error
        return not_applicable(
            f"output matches fp32 reference ({where})",
            f"not applicable: {metrics['fp16_range']}, so this fp16 variant cannot represent the "
            f"output (the fp32 variant checks it); measured: {measured}",
        )
    return Verdict(f"output matches fp32 reference ({where})", ok, measured)


def check_program_verified(info: dict, how: str, where: str) -> Verdict:
    """A program that verifies its own output finished and said so (run_info: completed, exit code 0)."""
    ok = bool(info.get("completed")) and info.get("exit_code") == 0
    return Verdict(
        f"output verified ({where})",
        ok,
        f"{how}; run_info: completed={info.get('completed')}, exit_code={info.get('exit_code')}",
    )


def output_tolerance(expected: Expected, npu: bool = False) -> tuple[float, float, str]:
    """(max abs diff allowed, minimum cosine, the rule in words) for the workload's outputs (OUTPUT_RTOL)."""
    scale = max((float(np.abs(a).max()) for a in expected.outputs if a.size), default=0.0)
    key = ("npu", expected.precision) if npu else ("portable", None)
    rtol = OUTPUT_RTOL[key]
    where = "npu, " + expected.precision if npu else "portable"
    rule = f"{rtol:g} x max|reference| {scale:.3g} + {OUTPUT_ATOL:g} ({where})"
    return rtol * scale + OUTPUT_ATOL, COSINE_MIN["npu" if npu else "portable"], rule


def check_output_file(saved: SavedOutput, where: str, expected: Expected, npu: bool = False) -> Verdict:
    """The saved model output (common.formats.outputs.read_output) matches the workload's reference (one rule:
    output_tolerance); a missing file fails."""
    name = f"output matches {expected.precision} reference ({where})"
    if saved is None or saved.arrays is None:
        return Verdict(name, False, f"{saved.path if saved else 'output.npy'} was not written")
    try:
        metrics = compare_outputs(saved.arrays, expected.outputs)
    except LabError as err:  # a different shape or number of outputs: a wrong output, not a bad input
        return Verdict(name, False, str(err))
    tol, cosine_min, rule = output_tolerance(expected, npu)
    v = check_output(metrics, where, tol, cosine_min)
    return Verdict(name, v.ok, f"{v.detail}; tol = {rule}{expected.precision_pointer()}")


# The same training steps from the same weights, with and without the profiler, on one device: the
# profiler must not change what is computed. CPU runs agree bit for bit; the margin is for devices
# whose reductions are not deterministic (atomic accumulation in some backward kernels).
LOSS_RTOL = 1e-4


def check_training_losses(profiled: list[float], plain: list[float], where: str) -> Verdict:
    """Each step's loss under the profiler equals the same step's loss without it (fresh model, same seed)."""
    name = f"training losses match an unprofiled run ({where})"
    if not profiled or len(profiled) != len(plain):
        return Verdict(name, False, f"{len(profiled)} profiled vs {len(plain)} unprofiled losses")
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(profiled, plain))
    return Verdict(
        name,
        worst <= LOSS_RTOL,
        f"{len(plain)} steps, loss {plain[0]:.6g} -> {plain[-1]:.6g}; largest relative difference "
        f"{worst:.2e} (tolerance {LOSS_RTOL:g})",
    )
