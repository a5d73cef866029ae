"""Where the L-sparse LDA local step and a memoized-VI update spend their time.

Reported below row 1 of ``bench_lda.py``:

- :func:`profile_sparse_step`: the model's local step with restart proposals
  on vs off (their cost), and a numba copy of the step's main L-sparse
  iterations (:func:`replica_factory`, on lsdask's own selection and digamma)
  that runs one part twice (top-L selection, ``exp``, ``digamma``, or the
  O(K) zeroing/copy of the per-document counts each iteration): the extra time
  is that part's cost. The copy reweights in log space, one ``exp`` per kept
  topic and token, and selects every token again when the active set shrinks;
  where the library's step does less (cached ``exp``, no reselection), the
  copy's part is an upper bound of the library's.
- :func:`lap_anatomy`: one batch task on a worker against the driver's share
  of an update (global step, ELBO, memo update, broadcast of the globals),
  and the lap these predict: how long the workers sit idle.
- :func:`exp_cost`: ``math.exp`` for ordinary and underflowing arguments
  (``exp(P - max P)`` over the topics is mostly near ``psi(alpha/K)`` and
  underflows).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from harness.timing import seconds, time_interleaved
from threadpoolctl import threadpool_limits

#: the replica's parts, run twice to time them (0: none)
DUPLICATES = (
    ("replica", 0),
    ("replica + 2x selection", 1),
    ("replica + 2x exp", 2),
    ("replica + 2x digamma", 3),
    ("replica + 2x O(K) per iteration", 4),
)


def replica_factory() -> Callable:
    """A numba copy of lsdask's L-sparse per-document iterations (no restarts) that
    can run one part twice: the extra cost of the duplicate is that part's cost."""
    import numba

    from lsdask.kernels.special import digamma
    from lsdask.kernels.topl import _select  # the step's own top-L selection

    @numba.njit(nogil=True)
    def replica(indptr, words, counts, C, a, L, max_iters, conv_thresh, eps, dup):
        # dup: 0 none, 1 selection, 2 exp, 3 digamma, 4 the O(K) zeroing/copy per iteration
        n_docs = indptr.shape[0] - 1
        K = C.shape[1]
        sink = 0.0
        its_total = 0
        n_sel = 0
        sel_elems = 0
        n_exp = 0
        n_dig = 0
        scratch = np.empty(L, dtype=np.int32)
        chosen = np.empty(L, dtype=np.int32)
        chosen2 = np.empty(L, dtype=np.int32)
        P = np.zeros(K)
        Wa = np.empty(K)
        active = np.empty(K, dtype=np.int64)
        for d in range(n_docs):
            lo = indptr[d]
            hi = indptr[d + 1]
            U = hi - lo
            resp = np.empty((U, L))
            idx = np.empty((U, L), dtype=np.int32)
            N = np.zeros(K)
            nL = min(L, K)
            for u in range(U):
                row = C[words[lo + u]]
                _select(row, nL, idx[u, :nL])
                n_sel += 1
                sel_elems += K
                if dup == 1:
                    _select(row, nL, scratch[:nL])
                    sink += scratch[0]
                wmax = row[idx[u, 0]]
                s = 0.0
                for j in range(nL):
                    e = math.exp(row[idx[u, j]] - wmax)
                    n_exp += 1
                    if dup == 2:
                        sink += math.exp(row[idx[u, j]] - wmax + 1e-300)
                    resp[u, j] = e
                    s += e
                for j in range(L):
                    if j >= nL:
                        idx[u, j] = idx[u, 0]
                    resp[u, j] = resp[u, j] / s if j < nL else 0.0
                    N[idx[u, j]] += counts[lo + u] * resp[u, j]
            if U == 0:
                continue
            n_active = 0
            for k in range(K):
                if N[k] > eps:
                    active[n_active] = k
                    n_active += 1
            it = 0
            shrank = False
            while it < max_iters:
                it += 1
                select = it <= 5 or it % 10 == 0 or shrank
                for j in range(n_active):
                    k = active[j]
                    P[k] = digamma(N[k] + a)
                    n_dig += 1
                    if dup == 3:
                        sink += digamma(N[k] + a + 1e-300)
                N_new = np.zeros(K)
                if dup == 4:
                    extra = np.zeros(K)
                    extra[:] = N
                    sink += extra[0]
                nL = min(L, n_active)
                for u in range(U):
                    row = C[words[lo + u]]
                    if select:
                        for j in range(n_active):
                            Wa[j] = row[active[j]] + P[active[j]]
                        _select(Wa[:n_active], nL, chosen)
                        n_sel += 1
                        sel_elems += n_active
                        if dup == 1:
                            _select(Wa[:n_active], nL, chosen2)
                            sink += chosen2[0]
                        for j in range(nL):
                            idx[u, j] = active[chosen[j]]
                        for j in range(nL, L):
                            idx[u, j] = idx[u, 0]
                    wmax = -np.inf
                    for j in range(nL):
                        wmax = max(wmax, row[idx[u, j]] + P[idx[u, j]])
                    s = 0.0
                    for j in range(nL):
                        e = math.exp(row[idx[u, j]] + P[idx[u, j]] - wmax)
                        n_exp += 1
                        if dup == 2:
                            sink += math.exp(row[idx[u, j]] + P[idx[u, j]] - wmax + 1e-300)
                        resp[u, j] = e
                        s += e
                    for j in range(L):
                        resp[u, j] = resp[u, j] / s if j < nL else 0.0
                        N_new[idx[u, j]] += counts[lo + u] * resp[u, j]
                delta = 0.0
                for j in range(n_active):
                    k = active[j]
                    delta = max(delta, abs(N_new[k] - N[k]))
                N[:] = N_new
                kept = 0
                for j in range(n_active):
                    k = active[j]
                    if N[k] > eps:
                        active[kept] = k
                        kept += 1
                shrank = kept < n_active
                n_active = kept
                if delta < conv_thresh and not shrank:
                    break
            its_total += it
        return sink, its_total, n_sel, sel_elems, n_exp, n_dig

    return replica


def profile_sparse_step(est: Any, X: sp.csr_matrix, L: int, repeats: int) -> dict[str, Any]:
    """Where the L-sparse local step spends its time (K of ``est``); fastest of
    ``repeats`` interleaved runs, 1 BLAS thread."""
    model, glob = est.model_, est.posterior_
    K = model.n_components
    no_restarts = dataclasses.replace(
        model, options=dataclasses.replace(model.options, restarts=False)
    )
    out: dict[str, Any] = {"K": K, "L": L}

    def lib(m: Any) -> Callable[[], Any]:
        return lambda: m.doc_topic_step(X, glob, L)

    X = sp.csr_matrix(X)
    cols, local = np.unique(X.indices, return_inverse=True)
    C = glob.logs.rows(cols)
    o = model.options
    args = (
        X.indptr.astype(np.int64),
        local.astype(np.int32),
        X.data.astype(np.float64),
        C,
        model.alpha / K,
        L,
        o.max_iters,
        o.conv_thresh,
        o.eps,
    )
    try:
        replica = replica_factory()
        replica(*args, 0)
    except Exception as exc:  # the library's primitives changed
        replica = None
        out["replica_error"] = f"{type(exc).__name__}: {exc}"
    fns: dict[str, Callable[[], Any]] = {
        "library (restarts on)": lib(model),
        "library (restarts off)": lib(no_restarts),
    }
    if replica is not None:
        for name, dup in DUPLICATES:
            fns[name] = lambda d=dup: replica(*args, d)
    with threadpool_limits(1):
        t = time_interleaved(fns, repeats)
    samples = {k: v["samples_s"] for k, v in t.items()}
    fastest = {k: float(np.min(v)) for k, v in samples.items()}  # least disturbed by other jobs
    out["samples_s"] = samples
    out["median_s"] = fastest
    full = fastest["library (restarts on)"]
    parts = {"restarts": full - fastest["library (restarts off)"]}
    if replica is not None:
        base = fastest["replica"]
        parts["selection"] = fastest["replica + 2x selection"] - base
        parts["exp"] = fastest["replica + 2x exp"] - base
        parts["digamma"] = fastest["replica + 2x digamma"] - base
        parts["O(K) zeroing + copy per iteration"] = (
            fastest["replica + 2x O(K) per iteration"] - base
        )
        parts["rest of the iterations (loops, gathers, init, entropy, summary)"] = (
            fastest["library (restarts off)"]
            - parts["selection"]
            - parts["exp"]
            - parts["digamma"]
            - parts["O(K) zeroing + copy per iteration"]
        )
        _, its, n_sel, sel_elems, n_exp, n_dig = replica(*args, 0)
        lib_its = None
        try:
            _, _, st = no_restarts.doc_topic_step(X, glob, L)
            lib_its = int(st[0])
        except Exception:
            pass
        out["replica_counts"] = {
            "iterations": int(its),
            "library_iterations": lib_its,
            "selections": int(n_sel),
            "selection_elements": int(sel_elems),
            "exps": int(n_exp),
            "digammas": int(n_dig),
        }
    out["parts_s"] = parts
    out["parts_share"] = {k: v / full for k, v in parts.items()}
    return out


def exp_cost() -> dict[str, float]:
    """ns per math.exp for ordinary and for underflowing arguments."""
    import numba

    @numba.njit
    def expsum(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += math.exp(x[i])
        return s

    out = {}
    n = 2_000_000
    for name, v in (
        ("exp(-5)", -5.0),
        ("exp(-720) (subnormal result)", -720.0),
        ("exp(-800) (underflows to 0)", -800.0),
    ):
        x = np.full(n, v)
        expsum(x[:10])
        best = min(seconds(lambda x=x: expsum(x)) for _ in range(3))
        out[name] = best / n * 1e9
    return out


def lap_anatomy(est: Any, client: Any, corpus_path: str, L: int, n_workers: int) -> dict:
    """Pieces of one memoized-VI update at this K: a batch task on a worker, the
    driver's global step, ELBO and memo arithmetic, the broadcast of the globals."""
    from distributed import wait

    from lsdask.io.corpus import corpus_source
    from lsdask.learn.tasks import LocalStepTask

    model, glob, stats = est.model_, est.posterior_, est.stats_
    source, _ = corpus_source(corpus_path)
    batch = source.batches[0]
    task = LocalStepTask(model, L)
    out: dict[str, Any] = {
        "K": model.n_components,
        "L": L,
        "batches": len(source.batches),
        "batches_per_update": n_workers,
    }
    t0 = time.perf_counter()
    with threadpool_limits(1):
        fresh = task(batch, glob)
    out["task_in_driver_s"] = time.perf_counter() - t0
    out["global_step_s"] = min(seconds(lambda: model.global_step(stats)) for _ in range(2))
    out["elbo_s"] = min(seconds(lambda: model.elbo(stats, glob)) for _ in range(2))
    # what memoized VI does per visited batch: the in-place total - old + new
    running = stats.dense_copy()
    out["memo_update_s"] = min(seconds(lambda: running.replace_(fresh, fresh)) for _ in range(2))
    # what memoized VI sends the workers after every update
    sent = model.for_local_step(glob) if hasattr(model, "for_local_step") else glob
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        fut = client.scatter(sent, broadcast=True, hash=False)
        wait(fut)
        times.append(time.perf_counter() - t0)
    out["broadcast_s"] = min(times)
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        client.submit(task, batch, fut, pure=False).result()
        times.append(time.perf_counter() - t0)
    out["task_roundtrip_s"] = min(times)
    nbytes = int(sent.logs.nbytes)  # the workers' copy holds E[log phi] only
    out["globals_mib"] = nbytes / 2**20
    waves = math.ceil(len(source.batches) / n_workers)
    driver = (
        out["global_step_s"] + out["elbo_s"] + n_workers * out["memo_update_s"] + out["broadcast_s"]
    )
    out["driver_per_update_s"] = driver
    out["predicted_lap_s"] = waves * (out["task_roundtrip_s"] + driver)
    out["predicted_driver_share"] = waves * driver / out["predicted_lap_s"]
    return out


def render(row1: dict[str, Any], L: int, repeats: int, fit_laps: int, fit_on: str) -> list[str]:
    """Row 1's details: each K's fit, samples and counters, the profile, the lap
    anatomy, and the cost of exp."""
    lines = ["## Row 1 details and profile of the L-sparse local step", ""]
    for K, r in row1["by_K"].items():
        cs, cd = r["counters"]["sparse"] or {}, r["counters"]["dense"] or {}
        lines += [
            f"### K={K}",
            "",
            f"Topics: lsdask fit L=8, {fit_laps} lap(s) on {fit_on} ({r['fit_s']:.0f} s). "
            f"Timed: `model.doc_topic_step` on {r['docs']} documents ({r['tokens']:,.0f} tokens), "
            f"options {r['options']}. "
            f"Samples: sparse {[round(x, 3) for x in r['samples_s']['sparse']]} s, "
            f"dense {[round(x, 2) for x in r['samples_s']['dense']]} s.",
            "",
            f"Counters: L={L}: {cs}; dense: {cd}.",
            "",
        ]
        p = r.get("profile", {})
        if "parts_s" in p:
            lines += [
                f"Where the L={L} step's {p['median_s']['library (restarts on)']:.3f} s go "
                f"(fastest of {repeats}; the replica runs one part twice, the extra time "
                "is that part):",
                "",
                "| Part | Seconds | Share |",
                "|---|---|---|",
            ]
            for k, v in p["parts_s"].items():
                lines.append(f"| {k} | {v:.3f} | {100 * p['parts_share'][k]:.0f}% |")
            lines += [
                "",
                f"Fastest times: { {k: round(v, 3) for k, v in p['median_s'].items()} }.  ",
                f"Replica counts: {p.get('replica_counts')}.",
                "",
            ]
        elif p:
            lines += [f"Profile: {p}", ""]
        la = r.get("lap_anatomy")
        if la:
            if "error" in la:
                lines += [f"Lap anatomy: {la['error']}", ""]
            else:
                lines += [
                    f"Lap anatomy at K={K}, L={la['L']} ({la['batches']} batches, "
                    f"{la['batches_per_update']} per update): one batch task "
                    f"{la['task_roundtrip_s']:.2f} s on a worker "
                    f"({la['task_in_driver_s']:.2f} s in the driver); per update the driver "
                    f"spends {la['driver_per_update_s']:.2f} s "
                    f"(global step {la['global_step_s']:.2f}, ELBO {la['elbo_s']:.2f}, memo update "
                    f"{la['memo_update_s']:.2f} x {la['batches_per_update']}, broadcast of "
                    f"{la['globals_mib']:.0f} MiB of globals {la['broadcast_s']:.2f}) while "
                    f"the workers wait; predicted lap {la['predicted_lap_s']:.1f} s, "
                    f"{100 * la['predicted_driver_share']:.0f}% of it in the driver.",
                    "",
                ]
    if "exp_ns" in row1:
        lines += [
            "math.exp cost (ns per call): "
            + ", ".join(f"{k}: {v:.1f}" for k, v in row1["exp_ns"].items())
            + ".",
            "",
        ]
    return lines
