"""Element types of the KV cache, as llama.cpp's ``-ctk`` / ``-ctv`` name them.

``kv_type`` is one name for both K and V (``"q8_0"``), or a pair: a tuple /
list ``("q8_0", "f16")`` or the string ``"q8_0,f16"`` (K first, then V).
The codes are the C++ core's KvType (src/core/kv_layout.h).
"""

from typing import Sequence, Tuple, Union

from .errors import AkunuError

KV_TYPES = {"f16": 0, "bf16": 1, "q8_0": 2, "q4_0": 3}
KV_TYPE_NAMES = {code: name for name, code in KV_TYPES.items()}

KvTypeArg = Union[str, Sequence[str], None]


def parse_kv_type(value: KvTypeArg) -> Tuple[int, int]:
    """(K code, V code) for a ``kv_type`` argument; None is F16 for both."""
    if value is None:
        return 0, 0
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
    elif isinstance(value, (tuple, list)) and all(isinstance(p, str) for p in value):
        parts = [p.strip() for p in value]
    else:
        raise AkunuError(f"kv_type must be a type name or a (K, V) pair of names, got {value!r}")
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2:
        raise AkunuError(f"kv_type names one type, or a K type and a V type; got {value!r}")
    codes = []
    for p in parts:
        if p.lower() not in KV_TYPES:
            raise AkunuError(f"unknown KV cache type {p!r} (expected one of {', '.join(KV_TYPES)})")
        codes.append(KV_TYPES[p.lower()])
    return codes[0], codes[1]


def kv_row_bytes(name: str, kv_dim: int) -> int:
    """Bytes one position's K (or V) row of kv_dim values takes in one layer
    (src/core/kv_layout.h: block types pad each row to 16 bytes)."""
    if name in ("f16", "bf16"):
        return 2 * kv_dim
    quant = kv_dim if name == "q8_0" else kv_dim // 2
    return (quant + kv_dim // 32 * 2 + 15) // 16 * 16
