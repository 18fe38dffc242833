"""Packing of the kernel parameter structs (src/core/kernel_params.h) for the tests."""

import struct


def matmul(N, K, n_tokens, dtype, x_stride, y_stride, has_bias=0, row0=0):
    return struct.pack("8I", N, K, n_tokens, dtype, x_stride, y_stride, has_bias, row0)


def embedding(dim, n_tokens, dtype, scale):
    return struct.pack("3If", dim, n_tokens, dtype, scale)


def norm(dim, n_tokens, rows_per_token, x_stride, eps, weight_offset=0.0, row0=0, y_stride=None):
    return struct.pack("4I2f2I", dim, n_tokens, rows_per_token, x_stride, eps, weight_offset, row0,
                       x_stride if y_stride is None else y_stride)


def rope(n_heads, head_dim, n_tokens, pos0, row_stride, neox, has_factors, base, scale):
    return struct.pack("7I2f", n_heads, head_dim, n_tokens, pos0, row_stride, neox, has_factors, base, scale)


def kv_write(kv_dim, n_tokens, pos0, k_stride, v_stride, max_ctx):
    return struct.pack("6I", kv_dim, n_tokens, pos0, k_stride, v_stride, max_ctx)


def attention(n_heads, n_kv_heads, head_dim, n_tokens, pos0, window, q_stride, out_stride, scale, max_ctx,
              causal=1, segmented=0, n_keys=0):
    return struct.pack("8If4I", n_heads, n_kv_heads, head_dim, n_tokens, pos0, window, q_stride, out_stride,
                       scale, max_ctx, causal, segmented, n_keys)


def im2col(channels, n_out, in_len, kernel=3, stride=1, pad=1):
    return struct.pack("6I", channels, n_out, in_len, kernel, stride, pad)


def add_rows(dim, n_tokens, pos0, segmented=0):
    return struct.pack("4I", dim, n_tokens, pos0, segmented)


def gated(n, n_tokens):
    return struct.pack("5I", n, n_tokens, n, n, n)


def add(n, n_tokens):
    return struct.pack("2I", n, n_tokens)


def argmax(vocab, row, n_rows=1):
    return struct.pack("3I", vocab, row, n_rows)


def sample(vocab, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, presence=0.0,
           frequency=0.0, window=64, n_bias=0, seed=0, pos0=0, use_mask=0):
    return struct.pack("If I 5f 6I", vocab, temperature, top_k, top_p, min_p, repeat_penalty, presence, frequency,
                       window, n_bias, seed & 0xFFFFFFFF, seed >> 32, pos0, use_mask)


def multi_gemv(K, n_tokens, mode, Ns, dtypes, norm=0, eps=1e-6, weight_offset=0.0):
    Ns = list(Ns) + [0] * (3 - len(Ns))
    dts = list(dtypes) + [0] * (3 - len(dtypes))
    return struct.pack("10I I 2f", K, n_tokens, len(dtypes), mode, *Ns, *dts, norm, eps, weight_offset)


MULTI_SEPARATE, MULTI_SILU, MULTI_GELU, MULTI_ACCUMULATE = 0, 1, 2, 3


def qk_norm_rope_kv(n_heads, n_kv_heads, head_dim, n_tokens, pos0, has_qk_norm, eps, weight_offset, neox,
                    has_factors, base, scale, max_ctx):
    return struct.pack("6I2f2I2fI", n_heads, n_kv_heads, head_dim, n_tokens, pos0, has_qk_norm, eps, weight_offset,
                       neox, has_factors, base, scale, max_ctx)
