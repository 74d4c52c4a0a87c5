"""The finding -> fix pairs: which verdict each answers, the one change that answers it, and how it is measured.

A portable pair is run: its baseline and its fix, each several times, interleaved. An NPU-only pair is listed
with its exact setting, what its sources say to expect, and where they say it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    name: str  # the pair's short name (``--pairs batch,bf16``)
    finding: str  # the verdict it answers, in the report's words
    fix: str  # the change, as the learner makes it in the lesson
    mode: str  # where it runs: "04", "04 --train", "03", "04 DDP"
    metric: str
    unit: str
    numerics: str | None = None  # the precision the fix computes in, when it can change the numbers: re-checked
    source: str = ""  # where the remedy comes from
    note: str = ""  # what the portable backend shows differently from the NPU, and why
    npu_only: bool = False
    expect: str = ""  # NPU-only: what the sources say to expect


STEP_PER_SAMPLE = ("median step time per sample", "us/sample")
PAIRS = [
    Pair(
        "batch",
        "host-bound: Free holds most of the step (the host launches ops slower than the device runs them)",
        "BATCH = 32 in 04_pyTorch/src/model_with_profiler.py (--batch 32): more samples per step",
        "04",
        *STEP_PER_SAMPLE,
        source="docs/bottlenecks.md (host-bound: a larger batch amortizes the fixed per-op "
        "host cost); MindStudio's host-bound troubleshooting",
    ),
    Pair(
        "bf16",
        "compute-bound in fp32: the device is busy and its matrix ops run in fp32",
        'PRECISION = "bf16" in 04_pyTorch/src/model_with_profiler.py (--precision bf16)',
        "04",
        *STEP_PER_SAMPLE,
        numerics="bf16",
        source="docs/bottlenecks.md (compute-bound: lower precision); the calibration's bf16 GEMM peak on this machine",
    ),
    Pair(
        "fp16",
        "compute-bound in fp32: the device is busy and its matrix ops run in fp32",
        'PRECISION = "fp16" in 04_pyTorch/src/model_with_profiler.py (--precision fp16)',
        "04",
        *STEP_PER_SAMPLE,
        numerics="fp16",
        source="docs/bottlenecks.md (compute-bound: lower precision); an NPU's cube is fp16 (docs/npu_reference.md)",
        note="on a CPU the gain depends on its fp16 arithmetic: one without it converts fp16 to fp32 around each "
        "op and gains nothing or loses, where an NPU's cube gains (the calibration's fp16 GEMM peak against "
        "its fp32 one, in any report's peaks line, says which this CPU is)",
    ),
    Pair(
        "fused-optimizer",
        "training step whose optimizer updates each parameter with its own op "
        "(torch.optim.SGD's loop: one aten::add_ per parameter)",
        "FUSED_OPTIMIZER = True in 04_pyTorch/src/model_with_profiler.py (--fused-optimizer): "
        "torch.optim.SGD(fused=True); torch_npu.optim.NpuFusedSGD on an NPU",
        "04 --train",
        *STEP_PER_SAMPLE,
        numerics="fp32",
        source="torch.optim.SGD's fused implementation; msprof-analyze advisor's affinity API rule (NpuFusedSGD)",
        note="on a CPU an op costs a few µs to dispatch, so one fused update for TinyMLP's 8 parameters saves "
        "little beside its 4 MB weight updates; on an NPU every launch also pays the host's dispatch and the "
        "kernel launch, which is what the fused op saves",
    ),
    Pair(
        "graph-optimization",
        "an unfused graph: MatMul then Add, and GELU's formula, run as separate nodes",
        'GRAPH_OPTIMIZATION = "all" in 03_api_pyAcl/src/infer.py (--graph-optimization all)',
        "03",
        "median execute time per sample",
        "us/sample",
        numerics="fp32",
        source="ONNX Runtime graph optimizations (GraphOptimizationLevel.ORT_ENABLE_ALL: Gemm, FusedMatMul, "
        "Gelu fusion); on an NPU ATC fuses when it builds the .om",
        note="the export as written, before any converter; the lab's own 03 runs feed the graph already optimized, "
        "as ATC would have built it",
    ),
    Pair(
        "accumulate",
        "communication-bound data parallelism: Communication(Not Overlapped), DDP's gradient "
        "all-reduce, holds a large part of the step",
        "ACCUMULATE = 4 in 04_pyTorch/src/ddp_with_profiler.py (--accumulate 4): 4 micro-batches per step, the "
        "first 3 under ddp.no_sync(), one all-reduce per step",
        "04 DDP",
        "slowest rank's median step time per sample",
        "us/sample",
        source="torch.nn.parallel.DistributedDataParallel.no_sync (PyTorch docs: gradients accumulate locally, "
        "the all-reduce runs in the first backward outside it); docs/bottlenecks.md (communication-bound)",
        note="each step now holds 4x the samples, so the model sees fewer optimizer steps per sample (a larger "
        "effective batch: the learning rate may need retuning); the lesson repeats one micro-batch where "
        "a data loader would give the next",
    ),
    Pair(
        "rebalance",
        "a slow rank: the others wait for it in every collective",
        "give every rank the same share of the same global batch (rank 1 at 3x the batch and rank 0 at 1x, "
        "both at 2x after: bash 04_pyTorch/run_ddp.sh 2 --slow-rank 1 --slow-factor 3, then --workload with the "
        "batch doubled)",
        "04 DDP",
        "slowest rank's median step time per sample",
        "us/sample",
        source="the cluster view's slow-rank verdict (04_pyTorch/README.md); msprof-analyze cluster's slow rank "
        "analysis",
    ),
]
PAIRS.append(
    Pair(
        "tiles",
        "a scalar-heavy kernel: the scalar part (the per-tile loop, addresses and queue handshakes) holds a "
        "quarter or more of the kernel's time per block",
        "TILE_NUM = 2 in 02_api_AscendC/src/add_kernel.cpp (cmake -DTILE_NUM=2): 4 tiles of 256 elements per core "
        "instead of 16 of 64",
        "02 (twin)",
        "median kernel time per block",
        "us",
        source="docs/mode02_kernel.md (the scalar unit runs the loop, computes addresses, issues every instruction "
        "and synchronises the queues: per tile); CANN's Ascend C best practices (tiling: fewer, larger "
        "DataCopy and vector calls)",
        note="modelled: the twin times its own loop and queue code as the scalar part, and runs MTE2, V and MTE3 "
        "one after another; on an NPU a larger tile must still fit the Unified Buffer, and the pipes overlap "
        "(see the double-buffer pair)",
    )
)
# Settings that exist only on an Ascend machine with torch_npu: listed with their sources, never run here.
NPU_ONLY = [
    Pair(
        "double-buffer",
        "a vector kernel whose copy-in, compute and copy-out take turns (one buffer per queue: "
        "MTE2 idle while V adds, V idle while MTE2 fetches)",
        "BUFFER_NUM = 2 in 02_api_AscendC/src/add_kernel.cpp (cmake -DBUFFER_NUM=2, the lesson's default): while V "
        "adds one tile, MTE2 fetches the next",
        "02 (NPU)",
        "the kernel's median duration",
        "us",
        npu_only=True,
        expect="the kernel's time tends to its longest pipe's rather than their sum (three equal stages: the vector "
        "unit busy 1/3 of the time without it); small gains where copying is short beside the compute, or "
        "the data fits one pass. Not on the twin: it runs the pipes one after another, so a second buffer "
        "only adds tiles there",
        source="https://www.hiascend.com/document/detail/en/canncommercial/850/opdevg/Ascendcopdevg/"
        "atlas_ascendc_best_practices_10_0033.html (Enabling DoubleBuffer); MindStudio msprof op simulator's "
        "pipeline chart, BUFFER_NUM 1 -> 2 (https://www.hiascend.com/document/detail/en/mindstudio/700/"
        "optools/Operatordevelopmenttools/atlasopdev_16_0091.html)",
    ),
    Pair(
        "task-queue",
        "host-bound on an NPU: Free holds most of the step",
        "export TASK_QUEUE_ENABLE=2 before the program starts (default 1)",
        "04 (NPU)",
        *STEP_PER_SAMPLE,
        npu_only=True,
        expect="less host time per launch: level 2 also moves workspace tasks to the second dispatch pipeline; "
        "takes effect with precompiled (binary) operators, off when ASCEND_LAUNCH_BLOCKING=1; peak NPU "
        "memory may rise (torch_npu 6.0.RC3 / CANN 8.0.RC3 docs)",
        source="https://www.hiascend.com/document/detail/en/mindstudio/830/practicalcases/GeneralPerformanceIssue/"
        "toolsample6_054.html; https://www.hiascend.com/document/detail/zh/Pytorch/600/apiref/Envvariables/"
        "Envir_019.html",
    ),
    Pair(
        "cpu-affinity",
        "host-bound on an NPU, dispatch uneven between steps",
        "export CPU_AFFINITY_CONF=2 "
        "(1: each card's process on its share of cores, torch_npu 6.0.RC2; 2: also the main and dispatch "
        "threads pinned, torch_npu 6.0.0)",
        "04 (NPU)",
        *STEP_PER_SAMPLE,
        npu_only=True,
        expect="steadier, shorter host dispatch; check the NUMA layout in a container",
        source="https://www.hiascend.com/document/detail/en/mindstudio/830/practicalcases/GeneralPerformanceIssue/"
        "toolsample6_058.html",
    ),
    Pair(
        "binary-operators",
        "operator compilation in the step (AclopCompile / aclopCompile on the host timeline)",
        "torch_npu.npu.set_compile_mode(jit_compile=False); torch.npu.config.allow_internal_format = False",
        "04 (NPU)",
        *STEP_PER_SAMPLE,
        npu_only=True,
        expect="no online compiles once the binary operator package is installed; the default on Atlas A2/A3 "
        "from torch_npu 6.0.RC2 (msprof-analyze advisor's operator dispatch rule prints these two lines)",
        source="https://gitcode.com/Ascend/msprof-analyze/blob/master/docs/en/user_guide/advisor_instruct.md "
        "(Operator Dispatch Issues); https://www.hiascend.com/document/detail/zh/Pytorch/700/apiref/"
        "apilist/ptaoplist_000610.html",
    ),
    Pair(
        "hf32",
        "compute-bound fp32 MatMul on the cube (Atlas A2/A3)",
        "torch.npu.matmul.allow_hf32 = True (default False; torch.npu.conv.allow_hf32 defaults to True)",
        "04 (NPU)",
        *STEP_PER_SAMPLE,
        numerics="fp16",
        npu_only=True,
        expect="faster fp32 MatMul: HF32 keeps fp32's range with about 11 mantissa bits (fp16's), so re-check "
        "precision (python -m common precision)",
        source="https://www.hiascend.com/document/detail/en/canncommercial/850/devaids/atctool/"
        "atlasatcparam_16_0077.html; Ascend/op-plugin docs/en/custom_APIs/torch_npu-npu/"
        "torch_npu-npu-matmul-allow_hf32.md",
    ),
    Pair(
        "aoe",
        "an op with no bound pipe (no ratio >= 0.8) that runs long: its tiling, not a unit, limits it",
        "torch_npu.npu.set_aoe(dump_dir) in a short one-device run, then aoe --job_type=2 --model_path=dump_dir",
        "04 (NPU)",
        "the op's median duration",
        "us",
        npu_only=True,
        expect="tuned tilings for static-shape operators; whether precompiled kernels on A2/A3 gain is not "
        "stated by the sources (unconfirmed); do not pin the process to cores while tuning",
        source="https://www.hiascend.com/document/detail/en/canncommercial/800/devaids/aoe/aoeep_16_043.html; "
        "msprof-analyze advisor's AOE template (operator_prompt.py)",
    ),
]
