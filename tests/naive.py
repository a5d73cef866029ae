"""Slow, obviously correct numpy references for every fast kernel."""

from __future__ import annotations

import numpy as np


def top_l(w: np.ndarray, L: int) -> np.ndarray:
    """Indices of the L largest entries, descending; ties: lower index first."""
    order = sorted(range(len(w)), key=lambda k: (-w[k], k))
    return np.asarray(order[:L], dtype=np.int64)


def softmax_rows(W: np.ndarray) -> np.ndarray:
    out = np.zeros_like(W, dtype=np.float64)
    for n in range(W.shape[0]):
        e = np.exp(W[n] - W[n].max())
        out[n] = e / e.sum()
    return out


def topl_resp(W: np.ndarray, L: int) -> tuple[np.ndarray, np.ndarray]:
    resp = np.zeros((W.shape[0], L))
    idx = np.zeros((W.shape[0], L), dtype=np.int64)
    for n in range(W.shape[0]):
        idx[n] = top_l(W[n], L)
        e = np.exp(W[n, idx[n]] - W[n, idx[n]].max())
        resp[n] = e / e.sum()
    return resp, idx


def densify(resp: np.ndarray, idx: np.ndarray, K: int) -> np.ndarray:
    R = np.zeros((resp.shape[0], K))
    for n in range(resp.shape[0]):
        for j in range(resp.shape[1]):
            R[n, idx[n, j]] += resp[n, j]
    return R


def weighted_rows(rows: np.ndarray, R: np.ndarray) -> np.ndarray:
    """sum_n R[n, k] rows[n] by explicit loops."""
    out = np.zeros((R.shape[1], rows.shape[1]))
    for n in range(rows.shape[0]):
        for k in range(R.shape[1]):
            out[k] += R[n, k] * rows[n]
    return out


def weighted_outer(X: np.ndarray, R: np.ndarray) -> np.ndarray:
    """S_k = sum_n r_nk x_n x_n^T as full (K, D, D) matrices."""
    return np.einsum("nk,ni,nj->kij", R, X, X)


def entropy(R: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(R > 0, R * np.log(R), 0.0).sum(axis=0)


def vech_rows(X: np.ndarray) -> np.ndarray:
    D = X.shape[1]
    iu, ju = np.triu_indices(D)
    return np.stack([np.outer(x, x)[iu, ju] for x in X]) if len(X) else np.zeros((0, len(iu)))
