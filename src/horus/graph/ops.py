"""Classify ATen ops of an exported graph into the catalog's op kinds (``horus.catalog.OP_KINDS``)."""

from __future__ import annotations

# Op names are ATen overload-packet names (``aten.conv2d.default`` -> ``conv2d``); in-place variants
# (trailing ``_``) map like their out-of-place op.
_KIND_OF_OP: dict[str, str] = {}
for _kind, _names in {
    "conv": ("conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d"),
    "linear": ("linear", "addmm"),
    "attention": ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
                  "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                  "_native_multi_head_attention"),
    "norm": ("batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm", "native_batch_norm",
             "native_layer_norm", "native_group_norm", "_native_batch_norm_legit",
             "_native_batch_norm_legit_no_training", "local_response_norm"),
    "activation": ("relu", "relu6", "hardtanh", "gelu", "silu", "sigmoid", "tanh", "hardswish", "hardsigmoid",
                   "leaky_relu", "elu", "selu", "celu", "softmax", "log_softmax", "_softmax", "_log_softmax",
                   "softplus", "mish", "prelu", "glu"),
    "pooling": ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
                "adaptive_max_pool2d", "max_pool2d_with_indices"),
    "embedding": ("embedding", "embedding_bag", "_embedding_bag"),
    "recurrent": ("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"),
    "elementwise": ("add", "sub", "rsub", "mul", "div", "pow", "neg", "exp", "log", "sqrt", "rsqrt", "abs",
                    "clamp", "clamp_min", "clamp_max", "where", "maximum", "minimum", "addcmul", "addcdiv",
                    "square", "reciprocal", "erf"),
}.items():
    for _name in _names:
        _KIND_OF_OP[_name] = _kind

# Matrix products whose kind depends on the operands: with a weight -> linear, else attention scores/values.
MATMUL_OPS: frozenset[str] = frozenset({"mm", "matmul", "bmm", "baddbmm", "einsum"})
# Ops that only re-view a tensor: a weight seen through them is still a weight.
VIEW_OPS: frozenset[str] = frozenset({
    "t", "transpose", "permute", "view", "reshape", "expand", "unsqueeze", "squeeze", "contiguous", "to",
    "_to_copy", "clone", "alias", "detach", "flatten", "select", "slice", "type_as", "numpy_T",
})
# Ops that carry weights (count towards depth).
WEIGHTED_KINDS: frozenset[str] = frozenset({"conv", "linear", "recurrent"})


def op_name(target: object) -> str:
    """``aten.conv2d.default`` -> ``conv2d``; ``aten.add_.Tensor`` -> ``add``; other callables -> their name."""
    packet = getattr(target, "_overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(target, "__name__", str(target))
    name = name.split(".")[-1]
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def kind_of(name: str) -> str | None:
    """The op kind of an op name, or None for shape/data-movement ops and matmuls (see MATMUL_OPS)."""
    return _KIND_OF_OP.get(name)
