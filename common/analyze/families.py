"""Op families: one table maps every backend's op names to a family and a label; shares, counts, top ops.

Pure functions over parsed rows; nothing here reads files or prints.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict

from common.analyze.robust import Estimate, estimate
from common.formats.records import OpStat, Task
from common.workload.expect import FAMILY_ORDER  # noqa: F401 (the family names, imported from here by the layers above)

# The order families are listed in (tables, legends). What each one holds:
#   matmul        MatMulV2/V3, BatchMatMul, Gemm, FusedMatMul, aten::addmm/mm/bmm
#   conv          Conv2D and its backprops, Conv, FusedConv, aten::convolution/cudnn_/mkldnn_convolution
#   attention     FlashAttentionScore(Grad), Attention, MultiHeadAttention, scaled_dot_product_attention,
#                 torch's fused encoder layer (aten::_transformer_encoder_layer_fwd)
#   recurrent     LSTM, GRU, RNN layers and cells: DynamicRNN(V2), aten::lstm/gru, aten::mkldnn_rnn_layer
#   norm          LayerNorm(V3/Grad), RmsNorm, BatchNormalization, BNTraining*, aten::native_layer_norm
#   activation    Relu, Gelu, FastGelu, Silu, Swiglu, Sigmoid, Tanh, Erf and their gradients; each keeps its
#                 own label (op_label): a ReLU is never reported as a GELU
#   softmax       SoftmaxV2, LogSoftmaxV2, Softmax, aten::_softmax and their gradients
#   elementwise   Add, Mul, Sub, RealDiv, Pow, Equal, DropOutDoMask, the AscendC add_custom kernel
#   reduce        ReduceSum/Mean/Max, ArgMax, aten::sum/mean, losses (they reduce to one number)
#   pool          MaxPool(WithArgmax), AvgPool, AdaptiveAvgPool, GlobalAveragePool, aten::max_pool2d
#   resize        Resize, ResizeNearestNeighborV2, ResizeBilinearV2, aten::upsample_nearest2d/bilinear2d
#   embedding     Embedding(Bag), aten::embedding (an exporter writes it as a Gather: indexing)
#   indexing      gathers, scatters and routing: Gather(V2/Elements/ND), ScatterND, IndexPut, index_select,
#                 index_add_, TopK, Sort, NonZero, Where (select by a mask)
#   cast          Cast, aten::to/_to_copy
#   layout        TransData, TensorMove, Transpose, Reshape, Concat, Split, Pad, aten::copy_/contiguous/clone
#   memcpy        transfers: MemcpyAsync, ORT's MemcpyFromHost/ToHost, host<->device copies, a scalar read
#                 back to the host (aten::_local_scalar_dense: what .item() and `if tensor:` run)
#   communication hcom_*/HCCL tasks, allReduce/allGather/broadcast/..., gloo:/nccl: collectives
#   optimizer     Foreach*, Apply*(Adam, Momentum, ...), aten::_foreach_*, fused Adam/SGD steps
#   init          tensors filled with constants or random numbers: MemSet, Fill, ZerosLike, OnesLike,
#                 DSA random generators, aten::uniform_/randn/fill_/zero_, erfinv_ (trunc_normal_'s)
#   other         anything no rule names
# FAMILY_ORDER (imported above) lists these families in report order; a workload's EXPECT names them too.

# Families whose ops read their inputs and write an output once, element by element (bounds/op.py
# models their memory traffic so) and those of them that do no arithmetic at all.
ELEMENTWISE_FAMILIES = frozenset({"activation", "elementwise", "cast", "layout", "memcpy", "init"})
NO_ARITHMETIC_FAMILIES = frozenset({"cast", "layout", "memcpy", "init"})

# How collectives are named: HCCL task names (hcom_allReduce__...), c10d ops and process-group backends.
_COLLECTIVE = r"(hcom_|hccl_?|c10d::|gloo:|nccl:|hccl:|mpi:|ucc:)"

# (family, label, pattern): the pattern must match a whole key (lower case, see _keys); the first rule
# that matches wins, so specific rules sit above general ones (ForeachAddList is an optimizer step,
# not an Add; DropoutGenMask draws random bits, DropoutDoMask applies them). A label of None means
# the op keeps the name it was found under (MatMulV2, aten::addmm, TransData ...).
_RULES: list[tuple[str, str | None, str]] = [
    ("communication", "AllReduce", _COLLECTIVE + r"?all_?reduce[a-z0-9_]*"),
    ("communication", "AllGather", _COLLECTIVE + r"?all_?gather[a-z0-9_]*"),
    ("communication", "ReduceScatter", _COLLECTIVE + r"?reduce_?scatter[a-z0-9_]*"),
    ("communication", "AllToAll", _COLLECTIVE + r"?all_?to_?all[a-z0-9_]*"),
    ("communication", "Broadcast", _COLLECTIVE + r"broadcast[a-z0-9_]*|broadcast"),
    (
        "communication",
        None,
        (
            r"hcom_[a-z0-9_]*|hccl[a-z0-9_]*|(c10d::|gloo:|nccl:|mpi:|ucc:)[a-z0-9_:]*"
            r"|(batch_?)?send(_?recv)?|recv|receive|barrier|notify_?(wait|record)"
        ),
    ),
    (
        "optimizer",
        None,
        (
            r"foreach[a-z0-9_]*|apply(adam|adamw|adagrad|adadelta|adamax|momentum|gradientdescent"
            r"|centeredrmsprop|rmsprop|ftrl|proximal|powersign|addsign|kerasmomentum|lamb)[a-z0-9]*"
            r"|(fused_)?(adam|adamw|sgd|lamb|lars|adagrad|rmsprop)(_[a-z0-9_]*)?"
        ),
    ),
    (
        "attention",
        None,
        (
            r"[a-z0-9_]*(attention|flash_?attn)[a-z0-9_]*|scaled_dot_product[a-z0-9_]*"
            r"|transformer_encoder_layer_fwd"
        ),
    ),
    (
        "recurrent",
        None,
        (
            r"(mkldnn_|cudnn_|miopen_|_?thnn_fused_)?(lstm|gru|rnn_tanh|rnn_relu|rnn)(_cell|_layer)?"
            r"[a-z0-9_]*|dynamic_?(rnn|gru|lstm)[a-z0-9]*|(basic_?)?lstm_?cell|common_?(lstm|gru)"
        ),
    ),
    (
        "matmul",
        None,
        (
            r"(fused|quant|weight_?quant|grouped|batch|quant_?batch|weight_?quant_?batch)*mat_?mul[a-z0-9]*"
            r"|(fused|q)?gemm(v\d+)?|gemv|mm|bmm|addmm|baddbmm|addbmm|addmv|mv|dot|vdot|linear|einsum"
            r"|scaled_mm|fullyconnection"
        ),
    ),
    (
        "conv",
        None,
        (
            r"(fused|qlinear|depthwise|de)?conv(?!ert)[a-z0-9_]*|(cudnn|mkldnn|miopen|slow|thnn)_conv[a-z0-9_]*"
            r"|convolution[a-z0-9_]*"
        ),
    ),
    (
        "norm",
        None,
        (
            r"(native_|cudnn_|miopen_)?(layer|batch|group|instance|rms|skip_?layer|skip_?simplified_?layer"
            r"|simplified_?layer|skip_?rms|add_?rms|add_?layer|embed_?layer|local_response|deep)_?norm"
            r"(alization)?[a-z0-9_]*|bn_?(training|infer)[a-z0-9_]*|lrn"
        ),
    ),
    ("softmax", None, r"[a-z0-9_]*softmax[a-z0-9_]*"),
    ("pool", None, r"[a-z0-9_]*pool[a-z0-9_]*"),
    ("resize", None, r"(upsample|resize|interpolate|grid_?sampler?|pixel_?shuffle|pixel_?unshuffle)[a-z0-9_]*"),
    ("embedding", None, r"embedding[a-z0-9_]*"),
    (
        "indexing",
        None,
        (
            r"gather[a-z0-9_]*|scatter[a-z0-9_]*|index[a-z0-9_]*|take[a-z_]*|(non_?zero|argwhere)[a-z_]*"
            r"|masked_?select|masked_?scatter[a-z_]*|where|select_?v2|top_?k(v\d+)?|sort(v\d+)?"
            r"|arg_?sort|one_?hot|bincount|histc|unique[a-z0-9_]*|searchsorted|bucketize"
        ),
    ),
    # ORT's QuickGelu is x * sigmoid(alpha * x): with alpha 1.0 (what ORT fuses x * Sigmoid(x) into) a SiLU
    ("activation", "QuickGelu", r"quick_?gelu"),
    ("activation", "Gelu", r"(fast_?|bias_?)?gelu(v\d+|_tanh|_erf)?"),
    ("activation", "Relu6", r"relu6"),
    ("activation", "LeakyRelu", r"leaky_?relu"),
    ("activation", "PRelu", r"prelu|rrelu(_with_noise)?"),
    ("activation", "Relu backward", r"threshold_?backward"),  # what aten and aclnn run for a ReLU's gradient
    ("activation", "Relu", r"relu(v\d+)?"),
    ("activation", "Threshold", r"threshold"),
    ("activation", "Silu", r"silu|swish"),
    ("activation", "Swiglu", r"swi_?glu"),
    ("activation", "Geglu", r"ge_?glu"),
    ("activation", "Glu", r"glu"),
    ("activation", "HardSigmoid", r"hard_?sigmoid"),
    ("activation", "LogSigmoid", r"log_?sigmoid(_forward)?"),
    ("activation", "Sigmoid", r"sigmoid"),
    ("activation", "HardTanh", r"hard_?tanh"),
    ("activation", "Tanh", r"tanh"),
    ("activation", "HardSwish", r"hard_?swish"),
    ("activation", "Elu", r"elu"),
    ("activation", "Selu", r"selu"),
    ("activation", "Celu", r"celu"),
    ("activation", "Mish", r"mish"),
    ("activation", "Softplus", r"softplus"),
    ("activation", "Softsign", r"softsign"),
    # ONNX Runtime runs an unfused GELU as x * 0.5 * (1 + Erf(x / sqrt 2)): one Erf per GELU; its
    # Div/Mul/Add neighbours are element-wise.
    ("activation", "Erf", r"erf"),
    (
        "cast",
        None,
        (
            r"cast(like|v\d+)?|to|to_copy|to_dtype[a-z_]*|npu_dtype_cast|_?cast_[a-z0-9_]*"
            r"|convert_element_type"
        ),
    ),
    (
        "init",
        None,
        (
            r"memset(v\d+)?|fill[a-z0-9_]*|zero|zeros(_like|like)?|ones(_like|like)?|full(_like)?"
            r"|empty[a-z_]*|uniform|normal|randn?(_like)?|randint(_like)?|randperm|random[a-z0-9_]*|stateless_?random[a-z0-9_]*"
            r"|truncated_?normal|bernoulli|multinomial|dsa[a-z0-9]*|dropout_?gen_?mask[a-z0-9]*|gen_?mask"
            r"|arange|range|linspace|eye|constant_?of_?shape|kaiming_uniform|xavier_[a-z_]*"
            # trunc_normal_ (torch.nn.init's, timm's weight init) maps uniform numbers through erfinv_
            r"|erfinv_?"
        ),
    ),
    ("memcpy", None, r"memcpy[a-z0-9_]*|(host_?to_?device|device_?to_?host|h2d|d2h|d2d)[a-z0-9_]*|local_scalar_dense"),
    (
        "layout",
        None,
        (
            r"trans_?data[a-z0-9_]*|tensor_?move|transpose[a-z0-9_]*|contiguous|clone|copy|identity"
            r"|reshape|view|unsafe_view|flatten|unflatten|squeeze|unsqueeze|permute|expand(_as)?"
            r"|broadcast_?to|broadcast_tensors|tile|repeat[a-z_]*|concat[a-z0-9]*|cat|stack|(unsafe_)?split[a-z0-9_]*"
            r"|(unsafe_)?chunk|slice[a-z0-9_]*|strided_?slice[a-z0-9]*|narrow|select"
            r"|pad(v\d+|d)?|constant_pad_nd|reflection_pad[a-z0-9_]*|replication_pad[a-z0-9_]*"
            r"|as_strided[a-z0-9_]*|shape|size|format[a-z0-9_]*|trans_?format|unfold|roll|flip"
        ),
    ),
    (
        "reduce",
        None,
        (
            r"reduce[a-z0-9_]*|sum|nansum|mean|nanmean|amax|amin|aminmax|max|min|prod|arg_?max[a-z0-9_]*"
            r"|arg_?min[a-z0-9_]*|cumsum|cumprod|std|var|var_mean|std_mean|norm"
            r"|linalg_vector_norm|all|any|logsumexp|count_nonzero"
            r"|(nll|mse|l1|smooth_l1|huber|kl_div|cross_entropy)_?loss[a-z0-9_]*"
            r"|binary_cross_entropy[a-z0-9_]*"
        ),
    ),
    (
        "elementwise",
        None,
        (
            r"add(n|v\d+|s|_custom|cmul|cdiv)?|sub|rsub|mul(s|v\d+|no_?nan)?|div(s|_no_?nan|no_?nan)?"
            r"|real_?div|true_?div|floor_?div|floor_divide|pow|square|sqrt|rsqrt|exp|expm1|log|log1p"
            r"|log2|log10|abs|neg|reciprocal|maximum|minimum|clamp[a-z_]*|clip(by_?value)?"
            r"|masked_?fill|masked_?select|equal|eq|ne|not_?equal|lt|le|gt|ge|less(_?equal)?"
            r"|greater(_?equal)?|logical_?(and|or|not|xor)|bitwise_[a-z]+|and|or|not|xor|floor|ceil"
            r"|round|trunc|sign|sin|cos|tan|atan2?|lerp|axpy(v\d+)?|mod|fmod|remainder|is_?nan"
            r"|is_?inf|is_?finite|nan_to_num|square_?sum(v\d+)?|dropout[a-z0-9_]*|dropout_?do_?mask"
            r"|native_dropout[a-z_]*|fused_?mul_?add[a-z0-9]*|mul_?add|addcmul|addcdiv"
        ),
    ),
]
_COMPILED = [(family, label, re.compile(pattern)) for family, label, pattern in _RULES]

# A gradient op is the forward op's family: ReluGrad, aten::gelu_backward, FlashAttentionScoreGrad, ...
_GRAD = re.compile(r"(_?backward|grad(v\d+)?)$")
# Level0 kernel names carry the aclnn API they ran under and the implementation: aclnnInplaceCopy_
# TensorMoveAiCore_TensorMove. The last token is the kernel's own op type (the OP Type a Level1
# export shows for the same kernel); the API name is the caller, and a caller launches helpers
# (aclnnMm_MatMulCommon_MemSet zeroes the output before the MatMul).
_ACLNN = re.compile(r"^aclnn(inplace)?", re.IGNORECASE)
_IMPL = re.compile(r"(aicore|aicpu)$", re.IGNORECASE)


def _rule(key: str) -> tuple[str, str | None] | None:
    for family, label, pattern in _COMPILED:
        if pattern.fullmatch(key):
            return family, label
    return None


def _keys(op_type: str) -> list[tuple[str, str]]:
    """Candidate (lower-case key, name as found) pairs for one op name, the most telling first.

    A framework name (aten::addmm, gloo:all_reduce) is one key. A kernel name is split on "_": its
    last token first (the kernel's own op type: Conv2DBackpropFilter6_MemSet is a MemSet, as Level1's
    OP Type says), then the whole name (add_custom), then the other tokens, the caller's last.
    """
    name = op_type.strip()
    if ":" in name:
        bare = name[6:] if name.lower().startswith("aten::") else name
        return [(bare.strip("_").lower(), name)]
    tokens = [
        found for t in re.split(r"_+", name) if t and not t.isdigit() and (found := _IMPL.sub("", _ACLNN.sub("", t)))
    ]
    whole = [] if _ACLNN.match(name) and "_" in name else [(name.strip("_").lower(), name)]
    if len(tokens) > 1:
        keys = [(tokens[-1].lower(), tokens[-1]), *whole, *((t.lower(), t) for t in reversed(tokens[:-1]))]
    else:
        keys = whole
    # a graph node's counter: Cast16, Add18 name a Cast and an Add
    keys += [(re.sub(r"\d+$", "", k), re.sub(r"\d+$", "", n)) for k, n in list(keys) if re.search(r"[a-z]\d+$", k)]
    return keys


def _without_counter(found: str, family: str) -> str:
    """Conv2D1, ReduceSum7 (graph-node counters) -> Conv2D, ReduceSum; MatMulV2 keeps its version."""
    bare = re.sub(r"(?<=[^\dVv])\d+$", "", found)
    hit = _rule(bare.lower()) if bare != found else None
    return bare if hit and hit[0] == family else found


@functools.lru_cache(maxsize=4096)
def classify(op_type: str) -> tuple[str, str]:
    """(family, label) of an op name from any backend or capture level; ("other", the name) when none fits."""
    for key, found in _keys(op_type):
        grad = _GRAD.search(key)
        for candidate, is_grad in ((key, False), (_GRAD.sub("", key).strip("_"), True)) if grad else ((key, False),):
            if not candidate:
                continue
            hit = _rule(candidate)
            if hit:
                family, label = hit
                if label is None:
                    return family, _without_counter(found, family)
                return family, f"{label} backward" if is_grad else label
    return "other", op_type.strip()


def op_family(op_type: str) -> str:
    """The family (one of FAMILY_ORDER) of an NPU op type, Level0 kernel name, aten or ONNX Runtime op."""
    return classify(op_type)[0]


def op_label(op_type: str) -> str:
    """The op's own name within its family: canonical for activations (Relu, Gelu, Silu, Erf, 'Relu backward'
    ...), otherwise the name that identified it (a Level0 kernel name's op token: TransData, MemSet ...)."""
    return classify(op_type)[1]


def family_time(stats: list[OpStat]) -> dict[str, float]:
    """Total µs per family."""
    totals: dict[str, float] = defaultdict(float)
    for s in stats:
        totals[op_family(s.op_type)] += s.total_us
    return dict(totals)


def family_share(stats: list[OpStat], exclude: tuple[str, ...] = ()) -> dict[str, float]:
    """Share (0..1) of summed op time per family, optionally leaving some families out."""
    totals = {f: t for f, t in family_time(stats).items() if f not in exclude}
    grand = sum(totals.values())
    return {f: (t / grand if grand else 0.0) for f, t in totals.items()}


def family_labels(stats: list[OpStat], n: int = 3) -> dict[str, list[str]]:
    """Per family, the labels of its ``n`` most time-consuming ops (what a family is made of)."""
    per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in stats:
        family, label = classify(s.op_type)
        per[family][label] += s.total_us
    return {f: [label for label, _ in sorted(times.items(), key=lambda kv: -kv[1])[:n]] for f, times in per.items()}


def family_counts(tasks: list[Task]) -> Counter[str]:
    return family_counts_of_types(Counter(t.op_type for t in tasks))


def family_counts_of_types(type_counts: dict[str, int]) -> Counter[str]:
    """Task count per family from task counts per OP Type (what an engine's group-by gives)."""
    out: Counter[str] = Counter()
    for op_type, count in type_counts.items():
        out[op_family(op_type)] += count
    return out


def per_forward_counts(tasks: list[Task], forwards: int) -> dict[str, float]:
    """Task count per family divided by the number of profiled forwards."""
    return {f: c / forwards for f, c in family_counts(tasks).items()}


def top_ops(stats: list[OpStat], n: int = 10) -> list[OpStat]:
    return sorted(stats, key=lambda s: s.total_us, reverse=True)[:n]


def forward_shares(stats: list[OpStat]) -> dict[str, float]:
    """Family shares of forward-pass time: one-off init ops (weight init, random input) left out."""
    return family_share(stats, exclude=("init",))


def forward_share_estimates(groups: list[list[Task]], exclude: tuple[str, ...] = ("init",)) -> dict[str, Estimate]:
    """Each family's share of forward time, forward by forward (``groups``: the tasks of each measured forward,
    step or execute), as a median with its quartiles: one slow forward moves a sum, not the median. A family
    absent from a forward has share 0 there. Forwards with no op time are left out."""
    per_forward = []
    for tasks in groups:
        totals: dict[str, float] = defaultdict(float)
        for t in tasks:
            family = op_family(t.op_type)
            if family not in exclude:
                totals[family] += t.duration_us
        grand = sum(totals.values())
        if grand > 0:
            per_forward.append({f: v / grand for f, v in totals.items()})
    found = {f for shares in per_forward for f in shares}
    return {f: estimate([shares.get(f, 0.0) for shares in per_forward]) for f in found}
