"""msprof lab's shared library, in layers; each imports only those before it.

    workload/, backend.py, errors.py   the workload (TinyMLP or a file; loader, model, record), npu or portable
                (detected once), one error type
    formats/    readers and writers of msprof / torch_npu files; datasets; multi-rank captures; run folders; saved outputs
    collect/    portable collectors, NPU command builders, the process launcher, calibration, msprof-analyze,
                the in-process Profiler (profiling.py)
    analyze/    pure functions over parsed rows: families, FLOPs, grouping (per forward, step, execute), bounds/
                (op, step, kernel), compare, cluster (slow rank, parallel layout), cross-mode; checks/ holds every
                check over records, each a Verdict, a module per subject (records, outputs, integrity, timing, ranks)
    render/     one Report value per report (report.py), laid out as text and Markdown (text.py) and as a page
                (html.py), from numbers already computed (never reads files, never measures)
    cli/        ``python -m common ...``
    modes/      each mode's harness: it launches the mode's lesson files (``<mode>/src/``, which import
                nothing of the lab) as programs, then reads, converts and checks what they wrote;
                lesson.py is the start-up, output folder and exit code every mode shares, reports.py reads a
                folder's exports for its report and report_files.py writes report.md / report.html (every mode
                and ``python -m common report``)

Importing ``common`` stays light (standard library only); heavy modules import torch themselves.
"""
