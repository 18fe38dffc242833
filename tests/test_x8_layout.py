"""The regrouped Q4_0 / Q8_0 layouts a GPU may load weights in
(core/dtype_descriptor.h: Q4_0_X8 / Q8_0_X8): the same weights as GGUF's
blocks, decoded (exactly) and multiplied (against float64) by the CPU
kernels that define them; the CUDA kernels are checked against these in
test_device_kernels.py."""

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

import kernel_params as kp
from akunu import _core
from backend_compare import rel_l2
from quant_samples import X8_CODES, random_matrix, regroup_x8


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q8_0])
def test_x8_decodes_to_the_same_weights(qtype):
    rng = np.random.default_rng(int(qtype))
    raw, ref = random_matrix(qtype, 6, 1024, rng)
    x8 = regroup_x8(raw, qtype)
    assert x8.size == raw.size
    got = _core.dequantize(x8.tobytes(), X8_CODES[qtype], ref.size)
    want = _core.dequantize(raw.tobytes(), int(qtype), ref.size)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q8_0])
@pytest.mark.parametrize("m", [1, 5, 40])
def test_x8_matmul_against_float64(qtype, m):
    rng = np.random.default_rng(int(qtype) * 100 + m)
    N, K = 96, 2048
    raw, ref = random_matrix(qtype, N, K, rng)
    x = rng.standard_normal((m, K)).astype(np.float32)
    y = np.full((m, N), np.nan, np.float32)
    name = ("gemv_" if m <= 8 else "gemm_") + ("q4_0_x8" if qtype == T.Q4_0 else "q8_0_x8")
    _core._run_cpu_kernel(name, [np.ascontiguousarray(regroup_x8(raw, qtype)), x, y],
                          kp.matmul(N, K, m, X8_CODES[qtype], K, N), 2)
    assert rel_l2(y, x.astype(np.float64) @ ref.T) < 1e-6

