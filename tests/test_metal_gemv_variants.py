"""Metal's GEMV variants (backend/metal/kernels/matmul.metal: gemv, gemv_wide,
gemv_large) and ChipConfig's choice among them (metal_launch.cpp:
metal_gemv_choice), through the MSL emulation: each variant against float64
numpy on the dequantized weights (every element within the float32
accumulation bound) and the CPU backend (relative L2 1e-5 float formats,
3e-2 quantized: the CPU rounds activations to 8 bits), at real shapes, for
every format it serves; then whole models on an emulated chip of each tier
of the book's table, whose tables take that tier's variants, against the CPU.
Inputs are fresh random numbers every run, outputs poisoned with NaN."""

import os

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

import akunu
from akunu import _testing
from tests.fixtures import kernel_params as kp
from tests.fixtures import random_gguf
from tests.fixtures.backend_compare import compare_with_cpu, rel_l2
from tests.fixtures.quant_samples import mlx_matrix, random_matrix
from tests.test_device_kernels import FORMATS, QUANT_VS_CPU_TOL, build_metal_emulation, float32_bound, rng_for

METAL = "metal-emu"  # the variants are chosen by the emulated chip (AKUNU_METAL_EMU_CHIP)
SMALL_BLOCK_FORMATS = [T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_1, T.Q5_1, T.IQ4_NL, T.MXFP4]
FLOAT = (T.F32, T.F16, T.BF16)


@pytest.fixture(scope="module", autouse=True)
def emulation_library():
    build_metal_emulation()


# -- the choice -----------------------------------------------------------------------------------

# Chips of each tier in the book's table: (cores, family).
TIERS = {"M1": (8, 7), "M1 Pro": (16, 7), "M1 Max": (32, 7), "M1 Ultra": (64, 7), "M2": (10, 8),
         "M3 Pro": (18, 8), "M4": (10, 9), "M4 Pro": (20, 9), "M4 Max": (40, 9)}
# Shapes: (N, K, format)
LOGITS_8B = (128256, 4096, T.Q6_K)
DOWN_8B_Q4_0 = (4096, 14336, T.Q4_0)
Q_8B_Q4_K = (4096, 4096, T.Q4_K)
K_PROJ_06B_Q8_0 = (1024, 1024, T.Q8_0)
QKV_270M_Q5_0 = (1024, 640, T.Q5_0)


def launch(shape, tier):
    N, K, q = shape
    name = f"gemv_{q.name.lower()}"
    return _testing.metal_launch(name, kp.matmul(N, K, 1, int(q), K, N), *TIERS[tier])


@pytest.mark.parametrize("tier", TIERS)
def test_each_tier_gets_the_books_gemv_choices(tier):
    """The book's decision tree: N > wide_gemv_threshold (32768): wide; else
    K >= q4_small_k_threshold (2048 base chips, 1024 M1-M3 Pro and up, 512 M4
    Pro and up) with a large-K kernel (32-value blocks): large; else standard,
    256 threads on gemv_wide_standard chips (16 cores and more), 128 below."""
    cores, family = TIERS[tier]
    pro = cores >= 16
    k_threshold = 512 if family >= 9 and pro else 1024 if pro else 2048
    standard_threads = 256 if pro else 128

    wide = launch(LOGITS_8B, tier)
    assert wide["function"] == "gemv_wide_q6_k" and wide["threads"] == 256
    assert wide["grid"] == ((128256 + 15) // 16, 1, 1)  # 8 SIMD groups of 2 rows

    down = launch(DOWN_8B_Q4_0, tier)  # K 14336: past every tier's threshold
    assert down["function"] == "gemv_large_q4_0" and down["threads"] == 128 and down["grid"] == (2048, 1, 1)
    assert down["tg_memory"] == 4 * 8 * 4  # a partial sum a (SIMD group, token)

    q = launch(Q_8B_Q4_K, tier)  # Q4_K has no large-K kernel (256-value blocks)
    assert q["function"] == "gemv_q4_k" and q["threads"] == standard_threads
    assert q["grid"] == (4096 // (standard_threads // 32), 1, 1)

    k = launch(K_PROJ_06B_Q8_0, tier)
    assert k["function"] == ("gemv_large_q8_0" if 1024 >= k_threshold else "gemv_q8_0")

    g = launch(QKV_270M_Q5_0, tier)
    assert g["function"] == ("gemv_large_q5_0" if 640 >= k_threshold else "gemv_q5_0")


def test_choice_depends_on_the_shape_not_the_token_count():
    """One to eight tokens take the same variant (fixed when the table is built); nine take gemm."""
    N, K = 40000, 1024
    names = {_testing.metal_launch("gemv_q8_0", kp.matmul(N, K, m, int(T.Q8_0), K, N), 8, 7)["function"]
             for m in range(1, 9)}
    assert names == {"gemv_wide_q8_0"}
    assert _testing.metal_launch("gemv_q8_0", kp.matmul(N, K, 9, int(T.Q8_0), K, N), 8, 7)["function"] == "gemm_q8_0"


# -- the kernels ----------------------------------------------------------------------------------

def run_variant(qtype_or_mlx, N, K, m, expect, key):
    rng = rng_for(("metal-gemv-variant", key))
    if isinstance(qtype_or_mlx, tuple):
        raw, code, w = mlx_matrix(qtype_or_mlx[0], qtype_or_mlx[1], N, K, rng)
        name, quantized = "gemv_mlx", True
    else:
        raw, w = random_matrix(qtype_or_mlx, N, K, rng)
        code, name, quantized = int(qtype_or_mlx), f"gemv_{qtype_or_mlx.name.lower()}", qtype_or_mlx not in FLOAT
    raw = np.ascontiguousarray(raw)
    x = rng.standard_normal((m + 1, K)).astype(np.float32)  # row0 = 1
    bias = rng.standard_normal(N).astype(np.float32)
    params = kp.matmul(N, K, m, code, K, N, has_bias=1, row0=1)
    # the emulated chip is an M4 (10 cores, family 9): thresholds 32768 (N) and 2048 (K)
    function = expect + name[len("gemv"):]
    assert _testing.metal_launch(name, params, 10, 9)["function"] == function
    before = _testing.metal_emu_function_counts()
    out = {}
    for dev in ("cpu", METAL):
        y = np.full((m, N), np.nan, np.float32)
        _testing.run_kernel(name, [raw, x, y, bias], params, device=dev)
        out[dev] = y
    ran = {f for f, c in _testing.metal_emu_function_counts().items() if c > before.get(f, 0)}
    assert ran == {function}, ran
    ref = x[1:].astype(np.float64) @ w.T + bias
    err = np.abs(out[METAL] - ref)
    assert (err <= float32_bound(x[1:], w)).all(), f"max error {err.max()}"
    assert rel_l2(out[METAL], out["cpu"]) < (QUANT_VS_CPU_TOL if quantized else 1e-5)


@pytest.mark.parametrize("shape", [
    (151936, 1024, T.Q6_K, 1),   # Qwen3-0.6B's logits head
    (128256, 2048, T.Q8_0, 1),   # Llama-3.2-1B's
    (262144, 640, T.Q8_0, 1),    # Gemma 3 270M's
    (40001, 256, T.F16, 3),      # an odd row count: the last SIMD group's second row is absent
], ids=lambda s: f"{s[0]}x{s[1]}-{s[2].name}-{s[3]}tok")
def test_gemv_wide_real_shapes(shape):
    N, K, q, m = shape
    run_variant(q, N, K, m, "gemv_wide", shape)


@pytest.mark.parametrize("shape", [
    (2048, 8192, T.Q4_0, 1),     # Llama-3.2-1B's down projection
    (4096, 14336, T.Q8_0, 1),    # Llama-3-8B's
    (1024, 3072, T.Q5_0, 5),     # Qwen3-0.6B's, speculative verification
    (1001, 2048, T.IQ4_NL, 8),   # an odd row count: one threadgroup's second row is absent
    (2880, 2880, T.MXFP4, 1),    # gpt-oss's width in MXFP4 (17-byte blocks at every byte offset)
], ids=lambda s: f"{s[0]}x{s[1]}-{s[2].name}-{s[3]}tok")
def test_gemv_large_real_shapes(shape):
    N, K, q, m = shape
    run_variant(q, N, K, m, "gemv_large", shape)


@pytest.mark.parametrize("qtype", FORMATS + [(4, 64), (3, 128)],
                         ids=lambda q: f"mlx{q[0]}g{q[1]}" if isinstance(q, tuple) else q.name)
def test_gemv_wide_every_format(qtype):
    run_variant(qtype, 32769 + 2, 256, 2, "gemv_wide", ("wide", str(qtype)))


@pytest.mark.parametrize("qtype", SMALL_BLOCK_FORMATS, ids=lambda q: q.name)
def test_gemv_large_every_format(qtype):
    run_variant(qtype, 130, 2048, 3, "gemv_large", ("large", qtype.name))


@pytest.mark.parametrize("K", [1024, 1030], ids=["vector-loads", "scalar-loads"])
@pytest.mark.parametrize("qtype", FLOAT, ids=lambda q: q.name)
def test_float_gemv_vector_and_scalar_loads(qtype, K):
    """F32 / F16 / BF16 rows load four values at once (float4 / half4 /
    ushort4) where K % 4 == 0, one at a time otherwise."""
    run_variant(qtype, 300, K, 2, "gemv", ("vec", qtype.name, K))


# -- whole models on each tier --------------------------------------------------------------------

@pytest.fixture(scope="module")
def wide_vocab_model(tmp_path_factory):
    """Llama in Q8_0 with dim 512, FFN 2048 and a 40000-token vocabulary: its
    logits head takes gemv_wide everywhere, its projections gemv_large or gemv
    by tier (K 512 and 2048)."""
    path = str(tmp_path_factory.mktemp("tiers") / "llama-q8_0.gguf")
    shape = random_gguf.Shape(dim=512, n_heads=8, n_kv_heads=2, head_dim=64, ffn_dim=2048, vocab=40000)
    random_gguf.write_model(path, "llama", "Q8_0", seed=17, shape=shape)
    return path


@pytest.mark.parametrize("tier", ["M1", "M1 Pro", "M4 Pro"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
def test_whole_model_on_each_tier_matches_cpu(wide_vocab_model, tier, fused):
    os.environ["AKUNU_METAL_EMU_CHIP"] = "%d,%d" % TIERS[tier]
    os.environ["AKUNU_METAL_FUSED_DECODE"] = "1" if fused else "0"
    try:
        m = akunu.load(wide_vocab_model, device=METAL, n_ctx=256)
    finally:
        del os.environ["AKUNU_METAL_EMU_CHIP"], os.environ["AKUNU_METAL_FUSED_DECODE"]
    compare_with_cpu(m, wide_vocab_model, 3e-2, n_tokens=8)


def test_the_tier_model_exercises_every_variant():
    """What the tier runs above choose for that model's GEMVs (logits 40000 x
    512, projections K 512, down K 2048), from the same launch rules the
    emulated device applies (the model's own device counts are another
    library's, not visible here)."""
    def choice(N, K, tier):
        return _testing.metal_launch("gemv_q8_0", kp.matmul(N, K, 1, int(T.Q8_0), K, N), *TIERS[tier])

    for tier in ("M1", "M1 Pro", "M4 Pro"):
        assert choice(40000, 512, tier)["function"] == "gemv_wide_q8_0"
        assert choice(512, 2048, tier)["function"] == "gemv_large_q8_0"
    assert choice(2048, 512, "M1")["function"] == "gemv_q8_0" and choice(2048, 512, "M1")["threads"] == 128
    assert choice(2048, 512, "M1 Pro")["function"] == "gemv_q8_0" and choice(2048, 512, "M1 Pro")["threads"] == 256
    assert choice(2048, 512, "M4 Pro")["function"] == "gemv_large_q8_0"

    def multi(K, N, tier):  # the fused tables' projections (gemv_multi), one Q8_0 matrix
        params = kp.multi_gemv(K, 1, kp.MULTI_ACCUMULATE, [N], [int(T.Q8_0)])
        return _testing.metal_launch("gemv_multi", params, *TIERS[tier])["function"]

    for tier in ("M1", "M1 Pro", "M4 Pro"):
        assert multi(2048, 512, tier) == "gemv_multi_large"  # down projection
    assert multi(512, 512, "M1") == multi(512, 512, "M1 Pro") == "gemv_multi"
    assert multi(512, 512, "M4 Pro") == "gemv_multi_large"
