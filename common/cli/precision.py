"""``python -m common precision``: which op computes wrongly, per path, against the fp32 reference of the same op.

Collects each path's per-op outputs (``common.collect.precision``), compares them op by op
(``common.analyze.precision``), prints the tables and writes report.txt and report.html into a folder the lab
owns (default ``precision_out/`` at the repository root). Exit 1 when a path names a divergent op.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from common.analyze.precision import TOLERANCES, CandidateResult, compare_ops, first_divergence_line
from common.formats.rundir import REPO_ROOT, check_output_dir, prepare_output_dir
from common.render.report import Section

DEFAULT_OUT = REPO_ROOT / "precision_out"
NPU_03 = (
    "03 on the NPU: each variant's .om ran once with the ACL dump (the dump block of acl.init's JSON), "
    "converted by msaccucmp.py convert; dump files under dump/<variant>/ (docs/precision.md)"
)


def _device(device_id: str) -> tuple[str, str]:
    """(torch device, backend banner) for this machine: the CPU on the portable backend, npu:<id> on an NPU."""
    from common.backend import detect, parse_device_id

    backend = detect()
    if not backend.is_npu:
        return "cpu", backend.banner()
    dev = parse_device_id(device_id)
    import torch
    import torch_npu  # noqa: F401 (registers the npu device with torch)

    torch.npu.set_device(dev)
    return f"npu:{dev}", backend.banner()


def run_precision(
    device_id: str, workload_file: str | None, out: str | None, torch_only: bool = False, cross_check: bool = False
) -> int:
    from common.backend import parse_device_id
    from common.collect import precision as collect
    from common.collect import runlogs
    from common.modes.pyacl import precision as mode03
    from common.render.html import report_page
    from common.render.precision import precision_report
    from common.render.text import render_text, section_lines
    from common.workload import load_workload

    out_dir = check_output_dir(Path(out) if out else DEFAULT_OUT)  # before the work: a bad --out stops here
    work = load_workload(workload_file)
    npu = _is_npu()
    if not torch_only:  # 03's variants for this workload, built or kept as up to date, as nox -s pyacl does
        mode03.build_models(work, device_id)
    files_03 = None if torch_only else mode03.mode03_files(work, npu)
    if npu:  # CANN's logs (torch_npu here, the lesson infer.py) and 03's dump go into the output folder: made now
        out_dir = prepare_output_dir(out_dir)
        runlogs.use_run_logs(True, out_dir, {})
    device, banner = _device(device_id)
    leaves = collect.leaf_modules(work.build_model())
    reference = collect.reference_outputs(work)
    results: list[CandidateResult] = []
    for name, how, precision, outputs in collect.torch_candidates(work, device):
        results.append(compare_ops(name, how, TOLERANCES[precision], outputs, reference))
    if files_03 is not None:
        candidates = (
            mode03.mode03_npu_candidates(work, leaves, parse_device_id(device_id), out_dir)
            if npu
            else mode03.mode03_candidates(work, leaves)
        )
        for name, how, precision, outputs, unmatched in candidates:
            result = compare_ops(name, how, TOLERANCES[precision], outputs, reference)
            result.unmatched += unmatched
            results.append(result)
    head = [
        f"{banner} | workload {work.name} ({work.where}, {work.precision}) | "
        f"{dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}",
        f"reference: each leaf module's output in the workload's fp32 copy on the CPU ({len(reference)} ops)",
        "metrics: msaccucmp's cosine, max abs and max rel error over the values finite in both, and the share "
        "of non-finite values; an op is out of tolerance when it leaves its precision's bound (docs/precision.md)",
        "max rel err is reported, not judged: an element near 0 inflates it (GELU's outputs near 0 give 1-30 on a "
        "correct fp16 run)",
    ]
    if torch_only:
        head.append("03's variants left out (--torch-only)")
    elif npu:
        head.append(NPU_03)
    report = precision_report(results, head)
    print(head[0], render_text(report), sep="\n")
    if not npu:
        out_dir = prepare_output_dir(out_dir)
    agree = True
    if cross_check:  # after the tables are printed: msprobe's dump and compare take a while
        sections, agree = _cross_check(work, workload_file, results, reference, device, out_dir)
        report.sections += sections
        for section in sections:
            print("", *section_lines(section), sep="\n")
    (out_dir / "report.txt").write_text(f"{head[0]}\n{render_text(report)}\n")
    (out_dir / "report.html").write_text(report_page(report))
    print(f"(written to {out_dir / 'report.txt'} and {out_dir / 'report.html'})")
    divergent = [r for r in results if r.first_divergent is not None]
    if not agree:
        print("the lab's and msprobe's per-module metrics disagree (the cross-check above)")
    if divergent:
        print(
            f"{len(divergent)} of {len(results)} paths name a divergent op: "
            + "; ".join(first_divergence_line(r) for r in divergent)
        )
        return 1
    print(f"no path names a divergent op ({len(results)} paths)")
    return 0 if agree else 1


CROSS_CHECK_HOW = (
    "msprobe's PrecisionDebugger (level L0) dumped the fp32 copy (golden) and its .half() copy (target) "
    "on the CPU, in msprobe's own environment; msprobe compare -tp target/step0 -gp golden/step0 "
    "compared them (its Result column says error for every row: fp16 against fp32 dtypes, metrics "
    "computed all the same); files under msprobe/"
)


def _cross_check(work, workload_file, results, reference, device: str, out_dir: Path) -> tuple[list[Section], bool]:
    """The lab's ``torch fp16`` table against msprobe's compare of the same two paths, both on the CPU:
    (the report's sections, whether they agree)."""
    from common.analyze.msprobe_check import cross_check
    from common.collect import msprobe
    from common.collect import precision as collect
    from common.formats.msprobe_compare import compare_result_file, read_compare_result
    from common.render.precision import cross_check_sections

    lab = next(r for r in results if r.name == "torch fp16")
    if device != "cpu":  # msprobe's environment holds the CPU torch: the lab's side runs there too
        fp16 = next(c for c in collect.torch_candidates(work, "cpu") if c[0] == "torch fp16")
        lab = compare_ops(fp16[0], fp16[1], TOLERANCES[fp16[2]], fp16[3], reference)
    folder = msprobe.dump_and_compare(out_dir / "msprobe", workload_file)
    csv_path = compare_result_file(folder)
    check = cross_check(lab, read_compare_result(csv_path))
    how = f"{CROSS_CHECK_HOW}; {csv_path.relative_to(out_dir)}"
    return cross_check_sections(check, how), check.agree


def _is_npu() -> bool:
    from common.backend import detect

    return detect().is_npu
