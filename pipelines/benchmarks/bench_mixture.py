"""Benchmark of L-sparse Gaussian mixtures on BSDS500 patches (lsparse Fig. 1, Sec. 4).

Every comparison is measured side by side in one run and reported as a RATIO,
because the machine this runs on is shared and noisy: kernel timings are
repeated (interleaved: A, B, A, B, ...) after a warm-up call that also compiles
the numba kernels, and the median is kept. Kernel comparisons run with BLAS
limited to one thread (``threadpoolctl.threadpool_limits(1)``), which is how a
Dask worker runs (one process, one thread).

Rows (see ``pipelines/benchmarks/README_mixture.md``):

1. top-L vs dense responsibilities from the same log weights (K=800, L=4);
2. summary step (features + N_k + S_k) with L=4 vs dense responsibilities;
3. one memoized-VI lap, L=4 vs dense, on a 2-worker LocalCluster;
4. all log weights of a batch vs a pure BLAS product of the same FLOP count;
5. heldout log-likelihood after the same number of laps, L = 1, 4, 16, dense;
6. scikit-learn ``BayesianGaussianMixture`` vs lsdask (time per pass, heldout);
7. peak RSS of the Dask workers for N and 4N patches, and of the driver.

Below the table: the fits of rows 3 and 5 and the local step's profile
(``profiles/mixture.py``).

Usage::

    python pipelines/benchmarks/bench_mixture.py --quick   # smoke run, < 2 min
    python pipelines/benchmarks/bench_mixture.py           # full run, 20-50 min

Writes ``pipelines/benchmarks/results/mixture{,-quick}.md`` and ``.json``.
Generated Zarr stores go to ``data/bench/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from harness import REPO, cluster, patches, peers
from harness.machine import load_avg
from harness.memory import mib, peak_rss_kib
from harness.report import check, header, step_times, table
from harness.run import Run, log, options
from harness.timing import each, lap_seconds, steady_lap, time_interleaved
from profiles import mixture as profile
from threadpoolctl import threadpool_limits


# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """Sizes of every row; ``FULL`` and ``QUICK`` below."""

    name: str
    repeats: int  # timed repetitions of each kernel (median kept)
    K: int  # clusters for rows 2-7
    init: str  # lsdask init for the quality fits (rows 3, 5, 6)
    # row 1
    topl_K: int
    topl_L: int
    topl_rows: int  # patches whose log weights are timed
    topl_init_rows: int  # sample the K=800 model is initialized from
    # rows 3 and 5: the training store and the laps
    lap_chunks: int
    n_laps: int
    sparsities: tuple[int | None, ...]
    heldout_rows: int
    # row 6
    sk_rows: int
    sk_passes: int
    # row 7
    rss_chunks: tuple[int, int]
    rss_sparsity: int
    n_workers: int = 2
    seed: int = 0
    # rows 3/5: one LocalCluster for all fits (quick) or a new one per fit via
    # ``client=None, n_workers=2``, exactly as a user would call it (full)
    shared_cluster: bool = False


FULL = Config(
    name="full",
    repeats=5,
    K=200,
    init="random",
    topl_K=800,
    topl_L=4,
    topl_rows=50_000,
    topl_init_rows=2_000,
    lap_chunks=28,
    n_laps=5,
    sparsities=(1, 4, 16, None),
    heldout_rows=100_000,
    sk_rows=100_000,
    sk_passes=5,
    rss_chunks=(7, 28),
    rss_sparsity=4,
)

QUICK = replace(
    FULL,
    name="quick",
    repeats=3,
    K=20,
    topl_rows=5_000,
    topl_init_rows=1_000,
    lap_chunks=2,
    n_laps=2,
    heldout_rows=5_000,
    sk_rows=5_000,
    sk_passes=2,
    rss_chunks=(1, 2),
    shared_cluster=True,
)


def sparsity_name(L: int | None) -> str:
    return "dense" if L is None else f"L={L}"


@dataclass
class Data:
    patch_dir: Path
    lap_store: str
    lap_rows: int
    heldout: np.ndarray
    rss_stores: list[tuple[str, int]] = field(default_factory=list)


def prepare_data(cfg: Config, patch_dir: Path, work_dir: Path) -> Data:
    """The patch stores (made if missing), prefixes of the training store for rows
    3/5 and 7, and a random sample of heldout patches."""
    patches.ensure_patches(patch_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    train = patch_dir / "train.zarr"
    lap_store, lap_rows = patches.prefix_store(train, cfg.lap_chunks, work_dir)
    rss = [patches.prefix_store(train, c, work_dir) for c in cfg.rss_chunks]
    heldout = patches.random_rows(patch_dir / "heldout.zarr", cfg.heldout_rows, cfg.seed)
    return Data(patch_dir, lap_store, lap_rows, heldout, rss)


# --------------------------------------------------------------------------
# rows 3 and 5 (and 6): lsdask fits
# --------------------------------------------------------------------------
def fit_mixture(X: Any, cfg: Config, L: int | None, n_laps: int, **kw: Any) -> tuple[Any, dict]:
    """Fit a zero-mean GaussianMixture for exactly ``n_laps`` memo laps; est and numbers."""
    from lsdask import GaussianMixture

    est = GaussianMixture(
        cfg.K,
        covariance_type="zero-mean",
        sparsity=L,
        algorithm="memo",
        n_laps=n_laps,
        tol=1e-300,
        random_state=cfg.seed,
        progress=False,
        **kw,
    )
    t0 = time.perf_counter()
    est.fit(X)
    wall = time.perf_counter() - t0
    laps = lap_seconds(est)
    info = {
        "sparsity": sparsity_name(L),
        "n_laps": int(est.n_laps_),
        "lap_s": laps,
        "steady_lap_s": steady_lap(laps),
        "fit_wall_s": wall,
        "setup_s": wall - float(est.time_trace_[-1]),  # cluster start + init + data defaults
        "final_elbo": float(est.elbo_trace_[-1]),
    }
    return est, info


def heldout_score(est: Any, heldout: np.ndarray) -> tuple[float, float]:
    t0 = time.perf_counter()
    score = float(est.score(heldout))
    return score, time.perf_counter() - t0


def run_quality_fits(cfg: Config, data: Data) -> dict[str, Any]:
    """Rows 3 and 5: memo fits on the lap store, 2-worker LocalCluster, same seed;
    then single batch tasks timed inside the workers (row 3) with the dense model."""
    fits, models = {}, {}
    with contextlib.ExitStack() as stack:
        client = None
        if cfg.shared_cluster:
            lc, client = cluster.local_cluster(cfg.n_workers)
            stack.callback(lc.close)
            stack.callback(client.close)
        where = {"client": client} if client else {"client": None, "n_workers": cfg.n_workers}
        for L in cfg.sparsities:
            fits[sparsity_name(L)], models[sparsity_name(L)] = quality_fit(cfg, data, L, where)
        log("row 3: per-batch task times inside the workers")
        dense = models["dense"]
        tasks = worker_task_seconds(cfg, data, dense.model_, dense.posterior_, client)
    return {"fits": fits, "models": models, "tasks": tasks}


def quality_fit(cfg: Config, data: Data, L: int | None, where: dict) -> tuple[dict, Any]:
    name = sparsity_name(L)
    log(f"row 3/5: fitting {name}, K={cfg.K}, {cfg.n_laps} laps on {data.lap_rows} patches")
    est, info = fit_mixture(data.lap_store, cfg, L, cfg.n_laps, init=cfg.init, **where)
    info["heldout_loglik"], info["score_s"] = heldout_score(est, data.heldout)
    info["load_avg"] = load_avg()
    log(f"  {name}: laps {np.round(info['lap_s'], 1)} s, heldout {info['heldout_loglik']:.4f}")
    return info, est


def _timed_task(batch: Any, model: Any, glob: Any, L: int | None) -> tuple[float, float, int]:
    """One batch task as the learners run it; (wall s, CPU s, minor page faults) in the worker."""
    from lsdask.learn.tasks import LocalStepTask

    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0, c0 = time.perf_counter(), time.process_time()
    LocalStepTask(model, L)(batch, glob)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0


TASK_FIELDS = ("wall_s", "cpu_s", "minor_faults")


def worker_task_seconds(
    cfg: Config, data: Data, model: Any, glob: Any, client: Any = None
) -> dict[str, Any]:
    """Per-batch task time inside Dask workers, L=4 vs dense, interleaved.

    The CPU seconds are what a lap costs a worker regardless of other load on
    the machine; the lap wall times of row 3 are not. ``client=None`` starts
    a fresh 2-worker LocalCluster for the measurement.
    """
    from lsdask.io.sources import as_batch_source

    batches = as_batch_source(data.lap_store).batches[: cfg.n_workers]
    samples: dict[str, dict[str, list[float]]] = {}
    with contextlib.ExitStack() as stack:
        if client is None:
            lc, client = cluster.local_cluster(cfg.n_workers)
            stack.callback(lc.close)
            stack.callback(client.close)
        m = client.scatter(model, broadcast=True)
        g = client.scatter(profile.local_globals(model, glob), broadcast=True)
        for rep in range(1 + cfg.repeats):  # the first round is the warm-up
            for L in (None, 4):
                futures = [client.submit(_timed_task, b, m, g, L, pure=False) for b in batches]
                times = client.gather(futures)
                if rep:
                    s = samples.setdefault(sparsity_name(L), {k: [] for k in TASK_FIELDS})
                    for i, k in enumerate(TASK_FIELDS):
                        s[k] += [t[i] for t in times]
    med = {f"{name}_{k}": float(np.median(v)) for name, s in samples.items() for k, v in s.items()}
    return {
        **med,
        "samples": samples,
        "ratio_cpu": med["dense_cpu_s"] / med["L=4_cpu_s"],
        "ratio_wall": med["dense_wall_s"] / med["L=4_wall_s"],
    }


def row3_lap(cfg: Config, data: Data, quality: dict, tasks: dict) -> dict[str, Any]:
    dense, sparse = quality["fits"]["dense"], quality["fits"]["L=4"]
    ratio = dense["steady_lap_s"] / sparse["steady_lap_s"]
    return {
        "store": data.lap_store,
        "n_patches": data.lap_rows,
        "n_workers": cfg.n_workers,
        "dense_lap_s": dense["steady_lap_s"],
        "sparse_lap_s": sparse["steady_lap_s"],
        "dense_laps_s": dense["lap_s"],
        "sparse_laps_s": sparse["lap_s"],
        "ratio_min_lap": min(dense["lap_s"][1:] or dense["lap_s"])
        / min(sparse["lap_s"][1:] or sparse["lap_s"]),
        "worker_task": tasks,
        "ratio": ratio,
        "target": 2.0,
        "pass": ratio >= 2.0,
    }


def row5_heldout(cfg: Config, quality: dict) -> dict[str, Any]:
    ll = {name: f["heldout_loglik"] for name, f in quality["fits"].items()}
    gap = abs(ll["L=4"] - ll["dense"]) / abs(ll["dense"])
    not_worse = ll["L=4"] >= ll["L=1"] and ll["L=16"] >= ll["L=1"]
    return {
        "heldout_loglik": ll,
        "n_laps": cfg.n_laps,
        "rel_gap_L4_dense": gap,
        "pass_gap": gap <= 0.005,
        "pass_vs_L1": bool(not_worse),
    }


# --------------------------------------------------------------------------
# rows 1, 2 and 4: kernels
# --------------------------------------------------------------------------
def init_model(X: np.ndarray, K: int, n_sample: int, seed: int) -> tuple[Any, Any]:
    """An lsdask model initialized from random example patches (lsdask's own init)."""
    from lsdask.learn import initial_stats
    from lsdask.models import MixtureModel, ZeroMeanGaussian

    rng = np.random.default_rng(seed)
    sample = X[np.sort(rng.choice(X.shape[0], size=n_sample, replace=False))]
    model = MixtureModel(ZeroMeanGaussian().with_data_defaults(sample), K, 1.0)
    return model, model.global_step(initial_stats(model, sample, "random", rng))


def row1_topl(cfg: Config, data: Data) -> dict[str, Any]:
    """Top-L vs dense responsibilities from the same real log weights, K=800."""
    from lsdask.kernels import dense_resp_from_log_weights, topl_resp_from_log_weights

    X = patches.random_rows(data.lap_store, cfg.topl_rows, cfg.seed + 1)
    t0 = time.perf_counter()
    model, glob = init_model(X, cfg.topl_K, cfg.topl_init_rows, cfg.seed)
    init_s = time.perf_counter() - t0
    with threadpool_limits(1):
        slices = patches.blocks(X.shape[0], model.block_rows)
        W = [model.log_weights(model.observation.prepare(X[sl]), glob) for sl in slices]
        L = cfg.topl_L
        t = time_interleaved(
            {
                "dense": lambda: each(dense_resp_from_log_weights, W),
                "topl": lambda: each(lambda w: topl_resp_from_log_weights(w, L), W),
            },
            cfg.repeats,
        )
    ratio = t["dense"]["median_s"] / t["topl"]["median_s"]
    return {
        "K": cfg.topl_K,
        "L": L,
        "n_patches": X.shape[0],
        "init_s": init_s,
        "model": f"lsdask random-example init from {cfg.topl_init_rows} patches",
        "dense_s": t["dense"]["median_s"],
        "topl_s": t["topl"]["median_s"],
        "timings": t,
        "ratio": ratio,
        "target": 3.0,
        "pass": ratio >= 3.0,
    }


def row2_summary(cfg: Config, b: profile.Batch) -> dict[str, Any]:
    """Summary step (N_k and S_k) from L-sparse vs dense responsibilities, as
    ``MixtureModel.local_step`` does it: dense, one BLAS product of the
    responsibilities with the vech(x x^T) features block by block; L-sparse,
    the whole batch at once from its raw rows grouped by cluster
    (``summarize_sparse_rows``) where the model has it, else block by block."""
    from lsdask.kernels import dense_counts, sparse_counts

    obs, K = b.model.observation, b.model.n_components
    prep = obs.prepare
    L = b.sparse[0][0].shape[1]
    resp_all = np.concatenate([r for r, _ in b.sparse])
    idx_all = np.concatenate([i for _, i in b.sparse])

    def dense(with_features: bool) -> Any:
        def run() -> dict:
            out = {"N": np.zeros(K), **obs.empty_stats(K)}
            for i, sl in enumerate(b.slices):
                F = prep(b.X[sl]) if with_features else b.features[i]
                out["N"] += dense_counts(b.R[i])
                obs.summarize_dense(F, b.R[i], out)
            return out

        return run

    def sparse_blocks(with_features: bool) -> Any:
        def run() -> dict:
            out = {"N": np.zeros(K), **obs.empty_stats(K)}
            for i, sl in enumerate(b.slices):
                F = prep(b.X[sl]) if with_features else b.features[i]
                resp, idx = b.sparse[i]
                out["N"] += sparse_counts(resp, idx, K)
                obs.summarize_sparse(F, resp, idx, out)
            return out

        return run

    def sparse_rows() -> dict:
        out = {"N": np.zeros(K), **obs.empty_stats(K)}
        out["N"] += sparse_counts(resp_all, idx_all, K)
        obs.summarize_sparse_rows(b.X, resp_all, idx_all, out)
        return out

    cases = {
        "dense": dense(True),
        "dense_no_features": dense(False),
        "sparse_blocks": sparse_blocks(True),
        "sparse_blocks_no_features": sparse_blocks(False),
        "features_only": lambda: each(lambda sl: prep(b.X[sl]), b.slices),
    }
    if obs.sparse_summary_from_rows:
        cases["sparse_rows"] = sparse_rows
    with threadpool_limits(1):
        t = time_interleaved(cases, cfg.repeats)
    med = {k: v["median_s"] for k, v in t.items()}
    # what the model runs: the features exist already (the log weights need
    # them), so the dense summary is the product alone; the sparse one is the
    # grouped whole-batch summary (or the block scatter without it)
    sparse_key = "sparse_rows" if "sparse_rows" in med else "sparse_blocks_no_features"
    ratio = med["dense_no_features"] / med[sparse_key]
    return {
        "K": K,
        "L": L,
        "n_patches": b.X.shape[0],
        **med,
        "sparse": med[sparse_key],
        "sparse_method": sparse_key,
        "timings": t,
        "ratio": ratio,
        "ratio_charging_features_to_dense": med["dense"] / med[sparse_key],
        "ratio_block_scatter_with_features": med["dense"] / med["sparse_blocks"],
        "target": 10.0,
        "pass": ratio >= 10.0,
    }


def row4_log_weights(cfg: Config, b: profile.Batch) -> dict[str, Any]:
    """All log weights of a batch (features + product + constants) vs a bare BLAS product."""
    N, D = b.X.shape
    K, M = b.model.n_components, D * (D + 1) // 2
    flops = N * K * D * (D + 1)  # 2 * N * M * K
    rng = np.random.default_rng(cfg.seed)
    A, B = rng.standard_normal((N, M)), rng.standard_normal((M, K))
    obs, model, glob = b.model.observation, b.model, b.glob
    with threadpool_limits(1):
        t = time_interleaved(
            {
                "lsdask": lambda: each(
                    lambda sl: model.log_weights(obs.prepare(b.X[sl]), glob), b.slices
                ),
                "blas": lambda: A @ B,
                "lsdask_product_only": lambda: each(
                    lambda F: model.log_weights(F, glob), b.features
                ),
            },
            cfg.repeats,
        )
    med = {k: v["median_s"] for k, v in t.items()}
    ratio = med["lsdask"] / med["blas"]
    return {
        "K": K,
        "D": D,
        "n_patches": N,
        "flops": flops,
        **med,
        "timings": t,
        "gflops_lsdask": flops / med["lsdask"] / 1e9,
        "gflops_blas": flops / med["blas"] / 1e9,
        "gflops_lsdask_product_only": flops / med["lsdask_product_only"] / 1e9,
        "ratio": ratio,
        "target": 1.5,
        "pass": ratio <= 1.5,
    }


def kernel_rows(cfg: Config, data: Data, est: Any) -> dict[str, Any]:
    """Rows 2 and 4 and the local-step profile on one batch, with a fitted model."""
    X = patches.random_rows(data.lap_store, patches.CHUNK_ROWS, cfg.seed + 3)
    batch = profile.make_batch(X, est.model_, est.posterior_, L=4)
    return {
        "row2": row2_summary(cfg, batch),
        "row4": row4_log_weights(cfg, batch),
        "profile": profile.profile_local_step(cfg.repeats, batch),
    }


# --------------------------------------------------------------------------
# row 6: scikit-learn
# --------------------------------------------------------------------------
def row6_sklearn(cfg: Config, data: Data) -> dict[str, Any]:
    """BayesianGaussianMixture vs lsdask (sync, 1 BLAS thread) on the same subsample."""
    from sklearn.exceptions import ConvergenceWarning

    X = patches.random_rows(data.lap_store, cfg.sk_rows, cfg.seed + 2)
    out: dict[str, Any] = {"n_patches": X.shape[0], "passes": cfg.sk_passes, "K": cfg.K}
    with threadpool_limits(1):
        sk = peers.sklearn_mixture(cfg.K, cfg.seed)
        pass_s = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for _ in range(cfg.sk_passes):  # first call: init + 1 EM iteration
                t0 = time.perf_counter()
                sk.fit(X)
                pass_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sk_ll = float(sk.score(data.heldout))
        sk_score_s = time.perf_counter() - t0
        # fit() re-runs an E-step after its iteration; time the bare EM iteration too
        em_s = []
        for _ in range(2):
            t0 = time.perf_counter()
            peers.sklearn_em_iteration(sk, X)
            em_s.append(time.perf_counter() - t0)
        out["sklearn"] = {
            "fit_call_s": pass_s,
            "pass_s": steady_lap(pass_s),
            "em_iteration_s": min(em_s),
            "em_iteration_samples_s": em_s,
            "heldout_loglik": sk_ll,
            "score_s": sk_score_s,
        }
        log(f"  sklearn: {np.round(pass_s, 1)} s per fit call, heldout {sk_ll:.4f}")
        for L in (None, 4):
            est, info = fit_mixture(X, cfg, L, cfg.sk_passes, init=cfg.init, client="sync")
            info["heldout_loglik"], info["score_s"] = heldout_score(est, data.heldout)
            out[sparsity_name(L)] = info
            log(f"  lsdask {sparsity_name(L)}: {np.round(info['lap_s'], 1)} s per lap")
    sk_iter = out["sklearn"]["em_iteration_s"]
    out["ratio_vs_dense"] = sk_iter / out["dense"]["steady_lap_s"]
    out["ratio_vs_L4"] = sk_iter / out["L=4"]["steady_lap_s"]
    return out


# --------------------------------------------------------------------------
# row 7: peak RSS (each measurement in a fresh process with a fresh cluster)
# --------------------------------------------------------------------------
def rss_child(store: str, K: int, L: int, n_workers: int, seed: int) -> None:
    """Run one memo lap on a fresh LocalCluster; print the peak RSS of workers and driver."""
    from lsdask import GaussianMixture

    lc, client = cluster.local_cluster(n_workers)
    with lc, client:
        before = client.run(peak_rss_kib)
        t0 = time.perf_counter()
        GaussianMixture(
            K,
            sparsity=L,
            n_laps=1,
            init="random",
            random_state=seed,
            client=client,
            progress=False,
        ).fit(store)
        lap_s = time.perf_counter() - t0
        workers = client.run(peak_rss_kib)
    cluster.emit(
        {
            "worker_peak_kib": sorted(workers.values()),
            "worker_start_kib": sorted(before.values()),
            "driver_peak_kib": peak_rss_kib(),
            "fit_wall_s": lap_s,
        }
    )


def row7_rss(cfg: Config, data: Data) -> dict[str, Any]:
    runs = []
    for store, n_rows in data.rss_stores:
        log(f"row 7: one L={cfg.rss_sparsity} lap on {n_rows} patches in a fresh process")
        cmd = [sys.executable, __file__, "--rss-child", store, "--rss-k", str(cfg.K)]
        cmd += ["--rss-l", str(cfg.rss_sparsity), "--rss-workers", str(cfg.n_workers)]
        fresh = cluster.run_fresh(cmd)
        if fresh.result is None:
            raise RuntimeError(f"RSS child failed ({fresh.failed}):\n{fresh.stderr[-3000:]}")
        runs.append({"store": store, "n_patches": n_rows, **fresh.result})
    small, large = runs
    ratio = max(large["worker_peak_kib"]) / max(small["worker_peak_kib"])
    return {
        "runs": runs,
        "ratio": ratio,
        "target": 1.1,
        "pass": ratio <= 1.1,
        "driver_ratio": large["driver_peak_kib"] / small["driver_peak_kib"],
        "K": cfg.K,
        "L": cfg.rss_sparsity,
    }


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------
def table_rows(res: dict[str, Any], cfg: Config) -> list[list[str]]:
    r1, r2, r3, r4, r5, r6, r7 = (res[f"row{i}"] for i in range(1, 8))
    ll = r5["heldout_loglik"]
    store_note = f"{r3['n_patches']:,} BSDS patches ({cfg.lap_chunks} chunks)"
    d6, s6, k6 = r6["dense"], r6["L=4"], r6["sklearn"]
    small, large = r7["runs"]
    wt = r3["worker_task"]
    return [
        [
            "1",
            f"top-L vs dense responsibilities from the same log weights, K={r1['K']}, "
            f"L={r1['L']}, {r1['n_patches']:,} patches in blocks of {res['block_rows']} "
            "rows [1 BLAS thread]",
            f"dense {r1['dense_s']:.3f} s, top-L {r1['topl_s']:.3f} s",
            f"{r1['ratio']:.1f}x",
            ">= 3x",
            check(r1["pass"]),
        ],
        [
            "2",
            f"summary step (N_k + S_k), L={r2['L']} vs dense, K={r2['K']}, "
            f"{r2['n_patches']:,} patches [1 BLAS thread]",
            f"dense (product with the vech features the log weights already made) "
            f"{r2['dense_no_features']:.3f} s, L={r2['L']} ({r2['sparse_method']}) "
            f"{r2['sparse']:.3f} s; charging the features ({r2['features_only']:.3f} s) to "
            f"dense: {r2['ratio_charging_features_to_dense']:.1f}x; the block scatter of "
            f"features instead: {r2['ratio_block_scatter_with_features']:.1f}x",
            f"{r2['ratio']:.1f}x",
            ">= 10x",
            check(r2["pass"]),
        ],
        [
            "3",
            f"one MVI lap, L=4 vs dense, K={cfg.K}, {store_note}, 2-worker LocalCluster "
            "(median of laps 2..n from time_trace_)",
            f"dense {r3['dense_lap_s']:.1f} s, L=4 {r3['sparse_lap_s']:.1f} s (ratio of fastest "
            f"laps {r3['ratio_min_lap']:.2f}x); one batch task in a worker: CPU dense "
            f"{wt['dense_cpu_s']:.2f} s, L=4 {wt['L=4_cpu_s']:.2f} s = {wt['ratio_cpu']:.2f}x "
            f"(wall {wt['ratio_wall']:.2f}x; minor page faults {wt['dense_minor_faults']:,.0f} "
            f"vs {wt['L=4_minor_faults']:,.0f})",
            f"{r3['ratio']:.2f}x",
            ">= 2x",
            check(r3["pass"]),
        ],
        [
            "4",
            f"all K={r4['K']} log weights of {r4['n_patches']:,} patches (D={r4['D']}) vs "
            f"A @ B of the same {r4['flops'] / 1e9:.1f} GFLOP [1 BLAS thread]",
            f"lsdask {r4['lsdask']:.3f} s ({r4['gflops_lsdask']:.1f} GFLOP/s; product alone "
            f"{r4['gflops_lsdask_product_only']:.1f}), BLAS {r4['blas']:.3f} s "
            f"({r4['gflops_blas']:.1f} GFLOP/s)",
            f"{r4['ratio']:.2f}x slower",
            "<= 1.5x",
            check(r4["pass"]),
        ],
        [
            "5a",
            f"heldout log-lik/patch after {r5['n_laps']} MVI laps, K={cfg.K}, "
            f"{store_note}, {res['n_heldout']:,} heldout patches, same seed",
            ", ".join(f"{k} {v:.3f}" for k, v in ll.items()),
            f"L=4 vs dense {100 * r5['rel_gap_L4_dense']:.3f}%",
            "within 0.5%",
            check(r5["pass_gap"]),
        ],
        [
            "5b",
            "same fits: L=4 and L=16 not worse than L=1",
            f"L=4 - L=1 = {ll['L=4'] - ll['L=1']:+.3f}, L=16 - L=1 = {ll['L=16'] - ll['L=1']:+.3f}",
            "",
            ">= L=1",
            check(r5["pass_vs_L1"]),
        ],
        [
            "6",
            f"scikit-learn BayesianGaussianMixture (full cov.) vs lsdask zero-mean, K={cfg.K}, "
            f"{r6['n_patches']:,}-patch subsample, sync, 1 process, 1 BLAS thread; heldout after "
            f"{r6['passes']} passes",
            f"s/pass: sklearn {k6['em_iteration_s']:.1f} (EM iteration; fit() call "
            f"{k6['pass_s']:.1f}), lsdask dense {d6['steady_lap_s']:.1f}, L=4 "
            f"{s6['steady_lap_s']:.1f}; heldout: sklearn {k6['heldout_loglik']:.3f}, dense "
            f"{d6['heldout_loglik']:.3f}, L=4 {s6['heldout_loglik']:.3f}",
            f"sklearn/dense {r6['ratio_vs_dense']:.2f}x, sklearn/L=4 {r6['ratio_vs_L4']:.2f}x",
            "(report)",
            "info",
        ],
        [
            "7",
            f"peak RSS per worker, one L={r7['L']} memo lap, K={r7['K']}, "
            f"{small['n_patches']:,} vs {large['n_patches']:,} patches, 2-worker LocalCluster",
            f"workers {', '.join(mib(k) for k in small['worker_peak_kib'])} vs "
            f"{', '.join(mib(k) for k in large['worker_peak_kib'])}; driver "
            f"{mib(small['driver_peak_kib'])} vs {mib(large['driver_peak_kib'])}",
            f"{r7['ratio']:.3f} (driver {r7['driver_ratio']:.2f})",
            "<= 1.1",
            check(r7["pass"]),
        ],
    ]


def render_markdown(res: dict[str, Any], cfg: Config) -> str:
    lines = header(res, f"lsdask mixture benchmark ({cfg.name} run)")
    lines += [
        "Rows marked [1 BLAS thread] run under `threadpoolctl.threadpool_limits(1)`, which is "
        "how a Dask worker runs (one process, one thread); their times are the median of "
        f"{cfg.repeats} interleaved repetitions after a warm-up call (numba compiled). "
        f"All patches are mean-removed 8x8 BSDS500 patches (D=64); lsdask init: {cfg.init}.",
        "",
    ]
    head = ["#", "Benchmark", "Measured", "Ratio", "Target", "Result"]
    lines += table(head, table_rows(res, cfg))
    lines += ["", "## Fits of rows 3 and 5", ""]
    fits = [
        [
            name,
            str(f["n_laps"]),
            f"{f['lap_s'][0]:.1f}",
            f"{f['steady_lap_s']:.1f}",
            f"{f['setup_s']:.1f}",
            f"{f['final_elbo']:.6e}",
            f"{f['heldout_loglik']:.4f}",
        ]
        for name, f in res["quality_fits"].items()
    ]
    head = ["sparsity", "laps", "lap 1 s", "median lap 2..n s", "setup s (cluster + init)"]
    lines += table([*head, "final ELBO", "heldout log-lik"], fits)
    lines += profile.render(res["profile"], res["row2"], cfg.n_workers)
    lines += ["", step_times(res), "", "Raw numbers: `" + res["json_name"] + "`.", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------
def run(cfg: Config, patch_dir: Path, work_dir: Path, run: Run) -> None:
    res = run.res
    data = run.step("data", lambda: prepare_data(cfg, patch_dir, work_dir))
    res["n_heldout"] = int(data.heldout.shape[0])
    log(f"data ready: lap store {data.lap_rows} rows, heldout subset {data.heldout.shape[0]}")

    quality = run.step("rows 3+5 fits", lambda: run_quality_fits(cfg, data))
    res["quality_fits"] = quality["fits"]
    dense = quality.pop("models")["dense"]
    res["row3"] = row3_lap(cfg, data, quality, quality["tasks"])
    res["row5"] = row5_heldout(cfg, quality)

    log("rows 2 and 4: kernels on one batch with the fitted dense model")
    res.update(run.step("rows 2+4", lambda: kernel_rows(cfg, data, dense)))

    log(f"row 1: top-L vs dense responsibilities, K={cfg.topl_K}")
    res["row1"] = run.step("row 1", lambda: row1_topl(cfg, data))
    log("row 6: scikit-learn vs lsdask")
    res["row6"] = run.step("row 6", lambda: row6_sklearn(cfg, data))
    res["row7"] = run.step("row 7", lambda: row7_rss(cfg, data))


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__, "small smoke run (< 2 min)")
    parser.add_argument(
        "--patches",
        type=Path,
        default=patches.PATCH_DIR,
        help="folder with train.zarr/heldout.zarr (made from BSDS500 if missing)",
    )
    parser.add_argument(
        "--work-dir", type=Path, default=REPO / "data/bench", help="generated Zarr stores"
    )
    # internal: one peak-RSS measurement in a fresh process (row 7)
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    parser.add_argument("--rss-k", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rss-l", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rss-workers", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_child, args.rss_k, args.rss_l, args.rss_workers, seed=0)
        return 0

    from lsdask import config

    cfg = QUICK if args.quick else FULL
    stem = "mixture-quick" if args.quick else "mixture"
    bench = Run(__file__, stem, args.out, argv, config=asdict(cfg), block_rows=config.BLOCK_ROWS)
    run(cfg, args.patches, args.work_dir, bench)
    bench.finish(lambda res: render_markdown(res, cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
