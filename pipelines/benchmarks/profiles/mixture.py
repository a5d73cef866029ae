"""One batch's local step of a zero-mean Gaussian mixture, stage by stage, dense vs L-sparse.

The stages are timed apart (interleaved, median, 1 BLAS thread) as
``MixtureModel.local_step`` runs them: features, log weights, responsibilities,
entropy, summary, the whole step; where the L-sparse step preselects (float32
weights with an error bound, then the candidate clusters weighed exactly in
float64), its own stages replace the dense ones. Also the driver's global step
and ELBO that run between waves, and the sizes sent to and from the workers.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np
from harness.patches import blocks
from harness.timing import each, time_interleaved
from threadpoolctl import threadpool_limits


@dataclass
class Batch:
    """One batch with everything its local step needs, precomputed block by block."""

    X: np.ndarray
    model: Any
    glob: Any
    slices: list[slice]
    features: list[np.ndarray]  # vech(x x^T) per block
    W: list[np.ndarray]  # log weights per block
    R: list[np.ndarray]  # dense responsibilities per block
    sparse: list[tuple[np.ndarray, np.ndarray]]  # (resp, idx) per block


def make_batch(X: np.ndarray, model: Any, glob: Any, L: int) -> Batch:
    from lsdask.kernels import dense_resp_from_log_weights, topl_resp_from_log_weights

    X = np.ascontiguousarray(X, dtype=np.float64)
    slices = blocks(X.shape[0], model.block_rows)
    feats = [model.observation.prepare(X[sl]) for sl in slices]
    W = [model.log_weights(F, glob) for F in feats]
    R = [dense_resp_from_log_weights(w) for w in W]
    sparse = [topl_resp_from_log_weights(w, L) for w in W]
    return Batch(X, model, glob, slices, feats, W, R, sparse)


def local_globals(model: Any, glob: Any) -> Any:
    """What the learners broadcast to the workers (the globals a local step needs)."""
    return model.for_local_step(glob) if hasattr(model, "for_local_step") else glob


def profile_local_step(repeats: int, b: Batch) -> dict[str, Any]:
    """Seconds per stage of one batch's local step, dense vs L-sparse (1 BLAS thread)."""
    from lsdask.kernels import (
        dense_entropy,
        dense_resp_from_log_weights,
        sparse_entropy,
        topl_resp_from_log_weights,
    )

    model, glob, K = b.model, b.glob, b.model.n_components
    L = b.sparse[0][0].shape[1]
    obs = model.observation
    pre: dict[str, Any] = {}
    # the model has no public name for "this L-sparse step preselects"
    if model._preselects(L):  # the L-sparse step's own stages (float32 weights)
        from lsdask.kernels import (
            bounded_candidates,
            stack_candidates,
            topl_resp_from_candidates,
        )

        g = local_globals(model, glob)  # as the workers have them
        setup = obs.bounded_setup(g.obs)
        offset = setup.offset + g.elogpi
        X64 = obs.batch_rows(b.X)
        low = [obs.bounded_expected_log_lik(X64[sl], setup) for sl in b.slices]  # fresh arrays
        parts = [bounded_candidates(W, offset, e, setup.col_err, a, L) for W, e, a in low]
        indptr, cand = stack_candidates(parts)
        exact = obs.expected_log_lik_pairs(X64, g.obs, indptr, cand) + g.elogpi[cand]
        pre = {
            "sparse_weights_float32": lambda: each(
                lambda sl: obs.bounded_expected_log_lik(X64[sl], setup), b.slices
            ),
            "sparse_candidates": lambda: each(
                lambda w: bounded_candidates(w[0], offset, w[1], setup.col_err, w[2], L), low
            ),
            "sparse_exact_pairs": lambda: obs.expected_log_lik_pairs(X64, g.obs, indptr, cand),
            "sparse_topl_from_candidates": lambda: topl_resp_from_candidates(
                indptr, cand, exact, L
            ),
        }
    stages = {
        "features": lambda: each(lambda sl: model.observation.prepare(b.X[sl]), b.slices),
        "log_weights_product": lambda: each(lambda F: model.log_weights(F, glob), b.features),
        "resp_dense": lambda: each(dense_resp_from_log_weights, b.W),
        "resp_topl": lambda: each(lambda w: topl_resp_from_log_weights(w, L), b.W),
        "entropy_dense": lambda: each(dense_entropy, b.R),
        "entropy_sparse": lambda: each(lambda s: sparse_entropy(s[0], s[1], K), b.sparse),
        "local_step_dense": lambda: model.local_step(b.X, glob, None),
        "local_step_sparse": lambda: model.local_step(b.X, glob, L),
        "global_step_and_elbo": lambda: model.elbo(stats, model.global_step(stats)),
        **pre,
    }
    stats = model.local_step(b.X, glob, None)
    with threadpool_limits(1):
        t = time_interleaved(stages, repeats)
    med = {k: v["median_s"] for k, v in t.items()}
    med["local_step_ratio"] = med["local_step_dense"] / med["local_step_sparse"]
    med["globals_pickle_mb"] = len(pickle.dumps(local_globals(model, glob))) / 1e6
    med["stats_pickle_mb"] = len(pickle.dumps(stats)) / 1e6
    if pre:
        med["candidates_per_row"] = cand.size / b.X.shape[0]
    return {"K": K, "L": L, "n_patches": b.X.shape[0], "preselect": bool(pre), **med}


def render(p: dict[str, Any], row2: dict[str, Any], n_workers: int) -> list[str]:
    """The profile's table (the summary stage from row 2's timings)."""
    lines = [
        "",
        f"## Local-step profile: one batch of {p['n_patches']:,} patches, K={p['K']}, "
        f"L={p['L']} [1 BLAS thread]",
        "",
        "| stage | dense s | L-sparse s |",
        "|---|---|---|",
    ]
    if p.get("preselect"):
        lines += [
            f"| features vech(x x^T), float64 | {p['features']:.3f} | - |",
            f"| log weights: float64 product (dense); float32 features and product in "
            f"blocks of <= 256 features, with the error bound (L-sparse) | "
            f"{p['log_weights_product']:.3f} | {p['sparse_weights_float32']:.3f} |",
            f"| candidates from the bound ({p['candidates_per_row']:.2f} per row) | - | "
            f"{p['sparse_candidates']:.3f} |",
            f"| exact float64 weights of the candidates | - | {p['sparse_exact_pairs']:.3f} |",
            f"| responsibilities | {p['resp_dense']:.3f} | "
            f"{p['sparse_topl_from_candidates']:.3f} |",
        ]
    else:
        lines += [
            f"| features vech(x x^T) | {p['features']:.3f} | {p['features']:.3f} |",
            f"| log weights product | {p['log_weights_product']:.3f} | "
            f"{p['log_weights_product']:.3f} |",
            f"| responsibilities | {p['resp_dense']:.3f} | {p['resp_topl']:.3f} |",
        ]
    lines += [
        f"| entropy | {p['entropy_dense']:.3f} | {p['entropy_sparse']:.3f} |",
        f"| summary N_k + S_k (no features) | {row2['dense_no_features']:.3f} | "
        f"{row2['sparse']:.3f} |",
        f"| **whole `local_step`** | **{p['local_step_dense']:.3f}** | "
        f"**{p['local_step_sparse']:.3f}** ({p['local_step_ratio']:.2f}x) |",
        f"| driver: global step + ELBO (once per wave of {n_workers} batches) | "
        f"{p['global_step_and_elbo']:.3f} | {p['global_step_and_elbo']:.3f} |",
        "",
        f"Globals broadcast to the workers every wave: {p['globals_pickle_mb']:.1f} MB pickled; "
        f"statistics returned per batch: {p['stats_pickle_mb']:.1f} MB.",
    ]
    return lines
