"""The regrouped Q4_0 / Q8_0 / Q6_K layouts a GPU may load weights in
(core/dtype_descriptor.h: Q4_0_X8 / Q8_0_X8 / Q6_K_X8): the same weights as GGUF's
blocks, decoded (exactly) and multiplied (against float64) by the CPU
kernels that define them; the CUDA kernels are checked against these in
test_device_kernels.py."""

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from tests.fixtures import kernel_params as kp
import akunu
from akunu import _core, _testing
from tests.fixtures.backend_compare import rel_l2
from tests.fixtures.quant_samples import X8_CODES, random_matrix, regroup_x8


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q8_0, T.Q6_K])
def test_x8_decodes_to_the_same_weights(qtype):
    rng = np.random.default_rng(int(qtype))
    raw, ref = random_matrix(qtype, 6, 4096, rng)
    x8 = regroup_x8(raw, qtype)
    assert x8.size == raw.size
    got = _core.dequantize(x8.tobytes(), X8_CODES[qtype], ref.size)
    want = _core.dequantize(raw.tobytes(), int(qtype), ref.size)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q8_0, T.Q6_K])
def test_loader_regroups_as_the_layout_says(qtype):
    """The C++ regrouping the loader runs (core/quant_blocks.cpp) against the
    one written here from the layout's description, and back."""
    rng = np.random.default_rng(int(qtype) + 7)
    raw, _ = random_matrix(qtype, 5, 4096, rng)
    got = _testing.regroup_x8(raw.tobytes(), int(qtype), 5, 4096)
    assert got == regroup_x8(raw, qtype).tobytes()
    assert _testing.regroup_x8(got, int(qtype), 5, 4096, back=True) == raw.tobytes()
    with pytest.raises(akunu.AkunuError, match="sizes do not match"):
        _testing.regroup_x8(raw.tobytes()[:-1], int(qtype), 5, 4096)
    with pytest.raises(akunu.AkunuError, match="no x8 layout"):
        _testing.regroup_x8(raw.tobytes(), int(T.Q4_K), 5, 4096)


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q8_0, T.Q6_K])
@pytest.mark.parametrize("m", [1, 5, 40])
def test_x8_matmul_against_float64(qtype, m):
    rng = np.random.default_rng(int(qtype) * 100 + m)
    N, K = 96, 2048
    raw, ref = random_matrix(qtype, N, K, rng)
    x = rng.standard_normal((m, K)).astype(np.float32)
    y = np.full((m, N), np.nan, np.float32)
    name = ("gemv_" if m <= 8 else "gemm_") + qtype.name.lower() + "_x8"
    _testing.run_kernel(name, [np.ascontiguousarray(regroup_x8(raw, qtype)), x, y],
                          kp.matmul(N, K, m, X8_CODES[qtype], K, N), 2)
    assert rel_l2(y, x.astype(np.float64) @ ref.T) < 1e-6

