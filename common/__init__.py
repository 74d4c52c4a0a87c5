"""msprof lab's shared library, in layers; each imports only those before it.

    workload/, backend.py, errors.py   the workload (TinyMLP or a file; loader, model, record), npu or portable
                (detected once), one error type
    formats/    readers and writers of msprof / torch_npu files; datasets; run folders and run_info.json
    collect/    portable collectors, NPU command builders, the process launcher, calibration, msprof-analyze
    analyze/    pure functions over parsed rows: families, FLOPs, steps, bounds, compare, cluster, cross-mode;
                checks.py (and ddp_checks.py, the several-rank ones) hold every check over records, each a Verdict
    render/     text, Markdown and HTML from numbers already computed (never reads files, never measures)
    cli/, lesson.py   ``python -m common ...``; the start-up, output folder and report every mode shares
    modes/      each mode's harness: it launches the mode's lesson files (``<mode>/src/``, which import
                nothing of the lab) as programs, then reads, converts and checks what they wrote

Importing ``common`` stays light (standard library only); heavy modules import torch themselves.
"""
