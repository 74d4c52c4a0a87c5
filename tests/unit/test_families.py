"""One op taxonomy for every backend and capture level: real op names -> family and label."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest
import torch
from helpers import FIXTURES

from common.analyze import families
from common.collect import torch_ops
from common.formats.datasets import find_datasets
from common.formats.records import OpStat
from common.render.html import FAMILY_COLORS
from common.workload import build_model, make_input

CAPTURES = FIXTURES / "npu" / "msinsight_torch_npu"
OTHER_MAX = 0.10  # "other" may hold at most this share of op time
LEVELS_AGREE_PP = 5.0  # Level0 and Level1 family shares of the same workload, percentage points

# Names as real captures spell them: Level0 kernel names (torch_npu kernel_details.csv, OP Type N/A),
# Level1 OP Types, msprof graph-node names, aten ops of the portable backend, ONNX Runtime node types.
REAL_NAMES = [
    # Level0 kernel names of the msinsight capture: the kernel's own op type (last token) decides
    ("aclnnMm_MatMulCommon_MatMulV2", "matmul", "MatMulV2"),
    ("aclnnAddmm_MatMulCommon_MatMulV2", "matmul", "MatMulV2"),
    ("aclnnMm_MatMulV3Common_MatMulV3", "matmul", "MatMulV3"),
    ("aclnnMm_MatMulCommon_MemSet", "init", "MemSet"),  # the helper that zeroes the MatMul's output
    ("Conv2DBackpropFilter6_MemSet", "init", "MemSet"),
    ("trans_TransData_9", "layout", "TransData"),
    ("aclnnMaxPool2dWithMask_TransDataSpecial_TransData", "layout", "TransData"),
    ("aclnnMaxPool2dWithMask_MaxPoolWithArgmaxV1AiCore_MaxPoolWithArgmaxV1", "pool", "MaxPoolWithArgmaxV1"),
    ("aclnnInplaceCopy_TensorMoveAiCore_TensorMove", "layout", "TensorMove"),
    ("aclnnInplaceRelu_Relu_Relu", "activation", "Relu"),
    ("aclnnThresholdBackward_ReluGrad_ReluGrad", "activation", "Relu backward"),
    ("aclnnLogSoftmax_LogSoftmaxAiCore_LogSoftmaxV2", "softmax", "LogSoftmaxV2"),
    ("aclnnReduceSum_ReduceSumOpAiCore_ReduceSum", "reduce", "ReduceSum"),
    ("aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList", "optimizer", "ForeachAddList"),
    ("aclnnForeachMulScalarV2_ForeachMulScalarV2_ForeachMulScalar", "optimizer", "ForeachMulScalar"),
    ("aclnnMuls_MulAiCore_Mul", "elementwise", "Mul"),
    ("aclnnDropoutGenMaskV2_DSAGenBitMask_DSAGenBitMask", "init", "DSAGenBitMask"),
    ("aclnnDropoutDoMask_DropoutDoMaskAiCore_DropOutDoMask", "elementwise", "DropOutDoMask"),
    ("aclnnTopk_CastAiCore_Cast", "cast", "Cast"),
    ("aclnnEqTensor_BroadcastToAiCore_BroadcastTo", "layout", "BroadcastTo"),
    ("aclnnNLLLoss_NLLLossAiCore_NLLLoss", "reduce", "NLLLoss"),
    ("hcom_allReduce__868_0_1", "communication", "AllReduce"),
    # the msprof-analyze kernel_details sample: a token after the op type that names nothing
    ("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore_varlen", "attention", "FlashAttentionScore"),
    ("aclnnMatmul_MatMulV3Common_MatMulV5", "matmul", "MatMulV5"),
    ("aclnnAdd_AddAiCore_Add", "elementwise", "Add"),
    # graph-node names with a counter (the version of MatMulV2 is not one)
    ("Cast16", "cast", "Cast"),
    ("Add18", "elementwise", "Add"),
    ("Conv2D1", "conv", "Conv2D"),
    ("Conv2DBackpropFilter10", "conv", "Conv2DBackpropFilter"),
    ("ReduceSum7", "reduce", "ReduceSum"),
    # Level1 / msprof OP Types
    ("MatMulV2", "matmul", "MatMulV2"),
    ("MatMulV3", "matmul", "MatMulV3"),
    ("BatchMatMul", "matmul", "BatchMatMul"),
    ("BatchMatMulV2", "matmul", "BatchMatMulV2"),
    ("Conv2D", "conv", "Conv2D"),
    ("Conv2DBackpropFilter", "conv", "Conv2DBackpropFilter"),
    ("Conv2DBackpropInput", "conv", "Conv2DBackpropInput"),
    ("FlashAttentionScore", "attention", "FlashAttentionScore"),
    ("FlashAttentionScoreGrad", "attention", "FlashAttentionScoreGrad"),
    ("LayerNormV3", "norm", "LayerNormV3"),
    ("LayerNormGrad", "norm", "LayerNormGrad"),
    ("RmsNorm", "norm", "RmsNorm"),
    ("Swiglu", "activation", "Swiglu"),
    ("Relu", "activation", "Relu"),
    ("ReluGrad", "activation", "Relu backward"),
    ("Gelu", "activation", "Gelu"),
    ("FastGelu", "activation", "Gelu"),
    ("GeluGrad", "activation", "Gelu backward"),
    ("Sigmoid", "activation", "Sigmoid"),
    ("SoftmaxV2", "softmax", "SoftmaxV2"),
    ("MaxPoolWithArgmaxV2", "pool", "MaxPoolWithArgmaxV2"),
    ("AvgPool", "pool", "AvgPool"),
    ("AdaptiveAvgPool3dGrad", "pool", "AdaptiveAvgPool3dGrad"),
    ("ReduceSum", "reduce", "ReduceSum"),
    ("TopKV2", "indexing", "TopKV2"),
    ("Add", "elementwise", "Add"),
    ("Mul", "elementwise", "Mul"),
    ("RealDiv", "elementwise", "RealDiv"),
    ("Sub", "elementwise", "Sub"),
    ("Equal", "elementwise", "Equal"),
    ("Cast", "cast", "Cast"),
    ("TransData", "layout", "TransData"),
    ("TensorMove", "layout", "TensorMove"),
    ("Transpose", "layout", "Transpose"),
    ("MemSet", "init", "MemSet"),
    ("Fill", "init", "Fill"),
    ("OnesLike", "init", "OnesLike"),
    ("DSARandomNormal", "init", "DSARandomNormal"),
    ("MemcpyAsync", "memcpy", "MemcpyAsync"),
    ("hcom_allReduce_", "communication", "AllReduce"),
    ("ApplyAdamD", "optimizer", "ApplyAdamD"),
    # aten ops (portable backend, torch_npu host side)
    ("aten::addmm", "matmul", "aten::addmm"),
    ("aten::mm", "matmul", "aten::mm"),
    ("aten::bmm", "matmul", "aten::bmm"),
    ("aten::convolution", "conv", "aten::convolution"),
    ("aten::_convolution", "conv", "aten::_convolution"),
    ("aten::mkldnn_convolution", "conv", "aten::mkldnn_convolution"),
    ("aten::cudnn_convolution", "conv", "aten::cudnn_convolution"),
    ("aten::native_layer_norm", "norm", "aten::native_layer_norm"),
    ("aten::batch_norm", "norm", "aten::batch_norm"),
    ("aten::unsafe_split", "layout", "aten::unsafe_split"),
    ("aten::unsafe_chunk", "layout", "aten::unsafe_chunk"),
    ("aten::native_batch_norm", "norm", "aten::native_batch_norm"),
    ("aten::relu", "activation", "Relu"),
    ("aten::relu_", "activation", "Relu"),
    ("aten::threshold_backward", "activation", "Relu backward"),
    ("aten::gelu", "activation", "Gelu"),
    ("aten::gelu_backward", "activation", "Gelu backward"),
    ("aten::silu", "activation", "Silu"),
    ("aten::_softmax", "softmax", "aten::_softmax"),
    ("aten::max_pool2d_with_indices", "pool", "aten::max_pool2d_with_indices"),
    ("aten::add", "elementwise", "aten::add"),
    ("aten::add_", "elementwise", "aten::add_"),
    ("aten::mul", "elementwise", "aten::mul"),
    ("aten::div", "elementwise", "aten::div"),
    ("aten::sum", "reduce", "aten::sum"),
    ("aten::mean", "reduce", "aten::mean"),
    ("aten::_native_multi_head_attention", "attention", "aten::_native_multi_head_attention"),
    ("aten::scaled_dot_product_attention", "attention", "aten::scaled_dot_product_attention"),
    ("aten::_foreach_add_", "optimizer", "aten::_foreach_add_"),
    ("aten::copy_", "layout", "aten::copy_"),
    ("aten::to", "cast", "aten::to"),
    ("aten::_to_copy", "cast", "aten::_to_copy"),
    ("aten::contiguous", "layout", "aten::contiguous"),
    ("aten::reshape", "layout", "aten::reshape"),
    ("aten::uniform_", "init", "aten::uniform_"),
    ("aten::erfinv_", "init", "aten::erfinv_"),
    ("aten::randn", "init", "aten::randn"),
    ("aten::ones_like", "init", "aten::ones_like"),
    ("gloo:all_reduce", "communication", "AllReduce"),
    ("add_custom", "elementwise", "add_custom"),  # 02's AscendC kernel
    # ONNX Runtime node types (03); Erf is one per decomposed GELU
    ("Gemm", "matmul", "Gemm"),
    ("MatMul", "matmul", "MatMul"),
    ("FusedMatMul", "matmul", "FusedMatMul"),
    ("Conv", "conv", "Conv"),
    ("FusedConv", "conv", "FusedConv"),
    ("BatchNormalization", "norm", "BatchNormalization"),
    ("LayerNormalization", "norm", "LayerNormalization"),
    ("SkipLayerNormalization", "norm", "SkipLayerNormalization"),
    ("Softmax", "softmax", "Softmax"),
    ("Erf", "activation", "Erf"),
    ("MaxPool", "pool", "MaxPool"),
    ("GlobalAveragePool", "pool", "GlobalAveragePool"),
    ("Div", "elementwise", "Div"),
    ("ReduceMean", "reduce", "ReduceMean"),
    ("Reshape", "layout", "Reshape"),
    ("Attention", "attention", "Attention"),
    ("MultiHeadAttention", "attention", "MultiHeadAttention"),
    ("sanitized_kernel", "other", "sanitized_kernel"),
]


@pytest.mark.parametrize(("name", "family", "label"), REAL_NAMES)
def test_real_names_map_to_family_and_label(name: str, family: str, label: str) -> None:
    assert (families.op_family(name), families.op_label(name)) == (family, label)


def test_a_relu_is_never_reported_as_a_gelu() -> None:
    for relu in ("Relu", "aten::relu", "aclnnInplaceRelu_Relu_Relu", "ReluGrad", "aten::threshold_backward"):
        assert families.op_family(relu) == "activation" and "Gelu" not in families.op_label(relu)
    stats = [
        OpStat("Relu", "AI_VECTOR_CORE", 7, 64.0, 2.7, 9.1, 15.5, 70.0),
        OpStat("ReluGrad", "AI_VECTOR_CORE", 7, 27.0, 8.1, 3.9, 26.4, 30.0),
    ]
    assert families.family_labels(stats) == {"activation": ["Relu", "Relu backward"]}


def test_real_model_ops_have_families() -> None:
    # what the models people bring run: recurrent layers, resizes, embeddings, routing, transposed convs
    cases = {
        "aten::mkldnn_rnn_layer": "recurrent",
        "LSTM": "recurrent",
        "DynamicRNN": "recurrent",
        "aten::_transformer_encoder_layer_fwd": "attention",
        "aten::upsample_bilinear2d": "resize",
        "Resize": "resize",
        "aten::embedding": "embedding",
        "Gather": "indexing",
        "aten::index_add_": "indexing",
        "aten::topk": "indexing",
        "aten::nonzero": "indexing",
        "aten::where": "indexing",
        "aten::slow_conv_transpose2d": "conv",
        "ConvTranspose": "conv",
        "aten::_local_scalar_dense": "memcpy",
        "aten::group_norm": "norm",
    }
    assert {op: families.op_family(op) for op in cases} == cases
    assert families.op_label("QuickGelu") == "QuickGelu"  # ORT's x * sigmoid(alpha x): not labelled a GELU


def test_every_family_is_ordered_and_coloured() -> None:
    ruled = {family for family, _, _ in families._RULES} | {"other"}
    assert ruled == set(families.FAMILY_ORDER) == set(FAMILY_COLORS)
    assert len(set(FAMILY_COLORS.values())) == len(FAMILY_COLORS)


def _dataset(level: str, rank: int):
    (ds,) = find_datasets(CAPTURES / level / f"rank{rank}_ascend_pt")
    return ds


def _kernel_rows(level: str, rank: int) -> list[dict[str, str]]:
    path = CAPTURES / level / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with Path(path).open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("rank", [0, 1])
def test_level0_kernel_names_classify_as_level1_op_types(rank: int) -> None:
    level0, level1 = _kernel_rows("text_level0", rank), _kernel_rows("text_level1", rank)
    assert {r["Type"] for r in level0} == {"N/A"} and len(level0) == len(level1) == 191
    # Level1 names the same kernels and adds their OP Type: a name must land where its type does,
    # under the same label
    assert [(r["Name"], families.classify(r["Name"])) for r in level1] == [
        (r["Name"], families.classify(r["Type"])) for r in level1
    ]
    assert Counter(families.classify(r["Name"]) for r in level0) == Counter(
        families.classify(r["Type"]) for r in level1
    )


@pytest.mark.parametrize("rank", [0, 1])
def test_level0_and_level1_family_shares_agree_and_other_is_small(rank: int) -> None:
    level0, level1 = _dataset("text_level0", rank), _dataset("text_level1", rank)
    assert not level0.has("op_statistic") and level1.has("op_statistic")
    # Level1's op_statistic.csv leaves the HCCL tasks out; Level0's op time comes from kernel_details,
    # which has them (~90% of it here): compare the compute ops, communication left out on both sides.
    assert families.family_share(level0.op_statistic)["communication"] > 0.8
    assert "communication" not in families.family_share(level1.op_statistic)
    share0 = families.family_share(level0.op_statistic, exclude=("communication",))
    share1 = families.family_share(level1.op_statistic, exclude=("communication",))
    for family in families.FAMILY_ORDER:
        assert abs(share0.get(family, 0.0) - share1.get(family, 0.0)) * 100 <= LEVELS_AGREE_PP, family
    for shares in (share0, share1, families.family_share(level0.op_statistic)):
        assert shares.get("other", 0.0) <= OTHER_MAX, shares
    # the CNN's own ops are where they belong
    assert {"conv", "matmul", "pool", "activation", "optimizer", "layout"} <= set(share1)
    assert families.family_labels(level1.op_statistic)["activation"] == ["Relu backward", "Relu"]


def _tinymlp_tasks(train: bool):
    model, x = build_model().train(train), make_input()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule, record_shapes=True
    ) as prof:
        for _ in range(3):
            if train:
                optimizer.zero_grad(set_to_none=True)
                model(x).square().mean().backward()
                optimizer.step()
            else:
                with torch.no_grad():
                    model(x)
            prof.step()
    start = prof.profiler.kineto_results.trace_start_ns() / 1000.0
    return torch_ops.tasks_from_nodes(torch_ops.nodes_from_events(prof.events()), start)


@pytest.mark.parametrize("train", [False, True])
def test_tinymlp_ops_have_families(train: bool) -> None:
    tasks = _tinymlp_tasks(train)
    stats = [
        OpStat(op, "CPU", 1, sum(t.duration_us for t in tasks if t.op_type == op), 0, 0, 0, 0)
        for op in {t.op_type for t in tasks}
    ]
    assert families.family_share(stats).get("other", 0.0) <= OTHER_MAX
    per_step = {
        f: n / 2
        for f, n in families.family_counts(tasks).items()  # 2 recorded steps
        if f in ("matmul", "activation")
    }  # a training step's loss and SGD ops come on top
    # forward: 4 Linear (addmm), 3 GELU; backward: two MatMuls per Linear but the first (its input needs
    # no gradient), one per GELU
    assert per_step == ({"matmul": 11, "activation": 6} if train else {"matmul": 4, "activation": 3}), per_step
    assert {families.op_label(t.op_type) for t in tasks if families.op_family(t.op_type) == "activation"} == (
        {"Gelu", "Gelu backward"} if train else {"Gelu"}
    )
