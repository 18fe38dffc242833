"""The plain-C++ half of the Metal backend, testable anywhere: ChipConfig
against the book's tuning table, and the launch geometry (which MSL function,
how many threadgroups, threadgroup memory within the GPU's 32 KiB)."""

import pytest

from tests.fixtures import kernel_params as kp
from akunu import AkunuError, _testing


@pytest.mark.parametrize("cores,family,slc_mb,fuse,q4k,wide,chunk", [
    (8, 7, 8, False, 2048, False, 64),      # M1
    (16, 7, 24, True, 1024, True, 96),      # M1 Pro
    (32, 7, 48, True, 1024, True, 128),     # M1 Max
    (64, 7, 96, True, 1024, True, 128),     # M1 Ultra
    (10, 8, 8, False, 2048, False, 64),     # M2 / M3
    (10, 9, 16, True, 2048, False, 128),    # M4
    (20, 9, 32, True, 512, True, 128),      # M4 Pro
    (40, 9, 48, True, 512, True, 128),      # M4 Max
])
def test_chip_config_follows_the_book(cores, family, slc_mb, fuse, q4k, wide, chunk):
    c = _testing.metal_chip_config(cores, family)
    assert c["slc_bytes"] == slc_mb << 20
    assert c["should_fuse_weights"] == fuse
    assert c["q4_small_k_threshold"] == q4k
    assert c["gemv_wide_standard"] == wide
    assert c["chain_decode_chunk"] == chunk
    assert c["norm_tg_size"] == 1024


def test_matmul_picks_gemv_or_gemm_by_tokens():
    for name in ("gemv_q4_k", "gemm_q4_k"):
        small = _testing.metal_launch(name, kp.matmul(4096, 4096, 8, 12, 4096, 4096), 10, 9)
        big = _testing.metal_launch(name, kp.matmul(4096, 4096, 9, 12, 4096, 4096), 10, 9)
        assert small["function"] == "gemv_q4_k" and small["grid"] == (1024, 1, 1) and small["threads"] == 128
        assert big["function"] == "gemm_q4_k" and big["grid"] == (128, 1, 1) and big["tg_memory"] == 12288


def test_geometry_within_gpu_limits():
    cases = [
        ("rmsnorm", kp.norm(8192, 3, 1, 8192, 1e-6)),
        ("rmsnorm", kp.norm(64, 3, 32, 2048, 1e-6)),
        ("attention", kp.attention(64, 8, 256, 512, 0, 0, 16384, 16384, 0.06, 4096)),
        ("argmax", kp.argmax(262144, 0, 4)),
        ("sample", kp.sample(262144, 0.8)),
        ("im2col_1d", kp.im2col(384, 1500, 3000, stride=2)),
        ("moe_route", kp.moe_route(4096, 64, 512, 0, 1, 4096, 129)),
        ("moe_matmul", kp.moe_matmul(768, 2048, 512, 12, 128, 8, 2048, 0, 6144, 768, 17, 0)),
        ("moe_matmul", kp.moe_matmul(2048, 768, 512, 12, 4096, 64, 6144, 768, 2048, 0, 129, 1)),
        ("moe_matmul", kp.moe_matmul(2048, 768, 1, 12, 128, 8, 6144, 768, 2048, 0, 17, 1)),
        ("moe_shared_add", kp.moe_shared_add(2048, 512, 2048, 2048, 1, 1)),
    ]
    for name, params in cases:
        launch = _testing.metal_launch(name, params, 8, 7)
        assert 32 <= launch["threads"] <= 1024 and launch["threads"] % 32 == 0, (name, launch)
        assert launch["tg_memory"] <= 32768, (name, launch)
        assert min(launch["grid"]) >= 1, (name, launch)
    assert _testing.metal_launch("rmsnorm", kp.norm(64, 3, 32, 2048, 1e-6), 8, 7)["threads"] == 64


def test_attention_head_dim_limit_is_a_clear_error():
    with pytest.raises(AkunuError, match="head_dim up to 256"):
        _testing.metal_launch("attention", kp.attention(8, 8, 512, 1, 0, 0, 4096, 4096, 0.04, 64), 8, 7)


# The regrouped Q4_0 / Q8_0 / Q6_K layouts: only a device whose weight_layout() asks for them (CUDA) loads them.
X8_KERNELS = {f"{k}_{f}_x8" for k in ("gemv", "gemm", "embedding") for f in ("q4_0", "q8_0", "q6_k")}


# Not on Metal: the collectives of tensor parallelism (a Mac has one GPU).
NOT_ON_METAL = {"all_reduce_sum", "all_gather_cols"}


def test_every_akunu_kernel_has_a_metal_spec():
    assert set(_testing.cpu_kernel_names()) - X8_KERNELS - NOT_ON_METAL == set(_testing.metal_kernel_names())
    with pytest.raises(AkunuError, match="no kernel named"):
        _testing.metal_launch("gemv_q9_9", b"", 8, 7)


def test_moe_matmul_picks_its_kernel_by_tokens_and_mode():
    """Up to 8 tokens: the GEMV kernels (a threadgroup a (token, slot) or a
    token); more: tokens grouped by expert (a threadgroup a row group and
    expert, or a row group over all experts for the weighted sum)."""
    def f(n_tok, weighted):
        p = kp.moe_matmul(768, 2048, n_tok, 12, 128, 8, 2048, 0 if not weighted else 768, 6144, 768, 17, weighted)
        return _testing.metal_launch("moe_matmul", p, 10, 9)
    assert f(1, 0)["function"] == "moe_matmul_slots_gemv" and f(1, 0)["grid"] == (192, 8, 1)
    assert f(8, 1)["function"] == "moe_matmul_sum_gemv" and f(8, 1)["grid"] == (192, 8, 1)
    assert f(9, 0)["function"] == "moe_matmul_slots" and f(9, 0)["grid"] == (24, 128, 1)
    assert f(9, 1)["function"] == "moe_matmul_sum" and f(9, 1)["grid"] == (96, 1, 1)
