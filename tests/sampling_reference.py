"""numpy reference of the sampler's definition (python/akunu/sampling.py)."""

import math

import numpy as np


def processed_logits(logits, history, pos0, window, repeat=1.0, presence=0.0, frequency=0.0, bias=None,
                     mask=None):
    """Bias, then llama.cpp's penalties over history[pos0+1-window .. pos0], then the mask."""
    z = np.array(logits, dtype=np.float32).copy()
    for tid, v in (bias or {}).items():
        z[tid] += np.float32(v)
    if window > 0:
        seen = history[max(0, pos0 + 1 - window): pos0 + 1]
        ids, counts = np.unique(np.asarray(seen), return_counts=True)
        for t, c in zip(ids, counts):
            v = z[t]
            v = v * np.float32(repeat) if v <= 0 else v / np.float32(repeat)
            z[t] = v - (np.float32(c) * np.float32(frequency) + np.float32(presence))
    if mask is not None:
        z[~mask] = -np.inf
    return z


def probabilities(z, temperature, top_k=0, top_p=1.0, min_p=0.0):
    """The exact distribution the sampler draws from: temperature, top_k, top_p, min_p."""
    z = np.asarray(z, dtype=np.float64)
    idx = np.flatnonzero(np.isfinite(z))
    # candidates ordered by (logit descending, id ascending)
    idx = idx[np.lexsort((idx, -z[idx]))]
    if top_k:
        idx = idx[:top_k]
    w = np.exp((z[idx] - z[idx].max()) / temperature)
    if top_p < 1.0:
        cum = np.cumsum(w)
        keep = int(np.searchsorted(cum, top_p * w.sum(), side="left")) + 1
        idx, w = idx[:keep], w[:keep]
    if min_p > 0:
        sel = w >= min_p
        idx, w = idx[sel], w[sel]
    p = np.zeros(z.size)
    p[idx] = w / w.sum()
    return p


def chi_square_ok(counts, probs, z=4.26):
    """Pearson's test at about p = 1e-5 (Wilson-Hilferty quantile), bins with expected < 5 pooled."""
    n = counts.sum()
    exp = probs * n
    big = exp >= 5
    obs = np.append(counts[big], counts[~big].sum())
    ex = np.append(exp[big], exp[~big].sum())
    keep = ex > 0
    obs, ex = obs[keep], ex[keep]
    stat = float(((obs - ex) ** 2 / ex).sum())
    df = max(len(obs) - 1, 1)
    limit = df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3
    return stat <= limit, stat, limit
