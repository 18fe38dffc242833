"""Random weight blocks of every supported GGML format (valid scales, random
quants), and their reference meaning from gguf-py's numpy dequantizers."""

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize
from random_gguf import random_blocks

# type -> (block elems, block bytes, byte offsets of f16 scale fields)
FORMATS = {
    T.F32: (1, 4, ()),
    T.F16: (1, 2, ()),
    T.BF16: (1, 2, ()),
    T.Q8_0: (32, 34, (0,)),
    T.Q4_0: (32, 18, (0,)),
    T.Q5_0: (32, 22, (0,)),
    T.Q4_K: (256, 144, (0, 2)),
    T.Q6_K: (256, 210, (208,)),
    T.Q4_1: (32, 20, (0, 2)),
    T.Q5_1: (32, 24, (0, 2)),
    T.Q2_K: (256, 84, (80, 82)),
    T.Q3_K: (256, 110, (108,)),
    T.Q5_K: (256, 176, (0, 2)),
    T.IQ4_NL: (32, 18, (0,)),
    T.IQ4_XS: (256, 136, (0,)),
}


def random_matrix(qtype, rows, cols, rng):
    """(raw bytes as uint8 array of shape (rows, row_bytes), float64 reference of shape (rows, cols))."""
    be, bb, scales = FORMATS[qtype]
    assert cols % be == 0
    if qtype == T.F32:
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        return a.view(np.uint8), a.astype(np.float64)
    if qtype == T.F16:
        a = rng.standard_normal((rows, cols)).astype(np.float16)
        return a.view(np.uint8), a.astype(np.float64)
    if qtype == T.BF16:
        bits = (rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        raw = bits.view(np.uint8)
        return raw, dequantize(raw, qtype).astype(np.float64).reshape(rows, cols)
    # d and dmin are used as positive multipliers in Q4_K / Q5_K / Q2_K
    raw = random_blocks(rng, rows, cols // be, bb, scales, qtype in (T.Q4_K, T.Q5_K, T.Q2_K))
    ref = dequantize(raw, qtype).astype(np.float64).reshape(rows, cols)
    return raw, ref


def mlx_matrix(bits, group, rows, cols, rng):
    """A random matrix MLX-quantized and repacked as akunu's MLX blocks (f32 scale,
    f32 bias, the group's bit stream): (blocks uint8 [rows, cols/group, 8 + bytes],
    dtype code, float64 dequantized reference)."""
    from hf_models import mlx_dequantize, mlx_quantize

    w = rng.standard_normal((rows, cols)).astype(np.float32)
    packed, s, b = mlx_quantize(w, bits, group)
    ref = mlx_dequantize(packed, s, b, bits, group).astype(np.float64)
    gb = group * bits // 8
    raw = packed.view(np.uint8).reshape(rows, -1)
    blocks = np.zeros((rows, cols // group, 8 + gb), np.uint8)
    blocks[:, :, 0:4] = s.astype(np.float32).view(np.uint8).reshape(rows, cols // group, 4)
    blocks[:, :, 4:8] = b.astype(np.float32).view(np.uint8).reshape(rows, cols // group, 4)
    blocks[:, :, 8:] = raw.reshape(rows, cols // group, gb)
    return blocks, 1000 + bits * 10 + {32: 0, 64: 1, 128: 2}[group], ref


# The GPU layouts of Q4_0 / Q8_0 / Q6_K (core/dtype_descriptor.h): codes, and
# the regrouping written here independently of the C++ one (core/quant_blocks.cpp).
X8_CODES = {T.Q4_0: 1102, T.Q8_0: 1108, T.Q6_K: 1114}
# Each format's block as its parts (start, end) in the order the x8 layout gathers them.
X8_PARTS = {T.Q4_0: ((0, 2), (2, 18)), T.Q8_0: ((0, 2), (2, 34)),
            T.Q6_K: ((0, 128), (128, 192), (192, 208), (208, 210))}  # ql, qh, scales, d


def regroup_x8(raw, qtype):
    """Rows of blocks (uint8, shape (rows, row_bytes)) as the x8 layout: per
    8 blocks, part by part, that part of each of the 8 blocks in order (Q4_0 /
    Q8_0: the 8 f16 scales, then the 8 blocks' quants)."""
    parts = X8_PARTS[qtype]
    rows = raw.shape[0]
    g = raw.reshape(rows, -1, 8, parts[-1][1])
    return np.concatenate([g[..., a:b].reshape(rows, g.shape[1], -1) for a, b in parts], axis=2).reshape(rows, -1)
