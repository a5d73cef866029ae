"""Benchmark of L-sparse LDA against gensim, scikit-learn and tomotopy (lsparse Fig. 2-3, Sec. 5-6).

Everything is measured side by side in ONE run on the same machine, with the
same priors (alpha = 0.5 in total, i.e. alpha/K per topic; eta = 0.1) and the
same heldout documents, and every method's topics are scored by the same
procedure: lsdask's ``document_completion`` (lsparse App. E) on the method's
topic-word matrix.

Rows (see ``pipelines/benchmarks/README_lda.md``):

1. the local step on 1,000 20 Newsgroups documents, L=8 vs dense (L=0 in the
   kernel), restarts on, K=400 and K=800, median of 3 (paper Fig. 3b); its
   profile (``profiles/lda.py``) is reported below the table;
2. time to quality on AP and 20 Newsgroups, K in {100, 400}: lsdask memoized
   VI with L in {1, 4, 8, K} on a 2-worker LocalCluster, gensim ``LdaModel``,
   scikit-learn ``LatentDirichletAllocation`` (online) and tomotopy
   ``LDAModel``: heldout score after each pass against wall seconds of
   training (evaluation excluded), every run under a wall-clock budget
   (``harness.budget``, ``harness.peers``, ``harness.scoring``);
3. heldout of L=8 vs dense (L=K) after the same laps; L=1 reported;
4. training tokens per second per core at K=400 on 20 Newsgroups, lsdask L=8
   vs gensim.

Usage::

    python pipelines/benchmarks/bench_lda.py --quick      # smoke run, < 3 min
    python pipelines/benchmarks/bench_lda.py --laps imdb  # lap after lap on the reviews
    nohup python pipelines/benchmarks/bench_lda.py > data/bench_lda.log 2>&1 &   # ~30 min

Writes ``pipelines/benchmarks/results/lda{,-quick}.md`` and ``.json`` and one
PNG per corpus and K (``lda{,-quick}-<corpus>-K<K>.png``). Generated data (the
AP training corpus, topic snapshots) go to ``data/lda_bench/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from harness import cluster, corpora, peers, traces
from harness.budget import BudgetExecutor, BudgetStop, Recorder, run_budgeted, throughput
from harness.plots import plot_time_to_quality
from harness.priors import ALPHA, ETA
from harness.report import check, fmt, fmt_s, header, table
from harness.run import Run, log, options
from harness.scoring import drop_snapshot_paths, score_runs, time_to_quality
from harness.timing import time_interleaved
from profiles import lda as profile
from threadpoolctl import threadpool_limits


# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """Sizes of every row; ``FULL`` and ``QUICK`` below."""

    name: str
    seed: int = 0
    n_test: int = 500  # heldout documents per corpus
    # row 1: the local step
    r1_docs: int = 1000
    r1_Ks: tuple[int, ...] = (400, 800)
    r1_L: int = 8
    r1_repeats: int = 3
    r1_fit_laps: int = 2  # laps of the short lsdask fit (L=8) that gives the topics
    # rows 2-4: time to quality
    corpora: tuple[str, ...] = ("ap", "20news")
    Ks: tuple[int, ...] = (100, 400)
    # every run starts as LDA's default (init="auto": collapsed Gibbs sweeps on the
    # initialization sample, in the driver and on the clock) but "8+kmeans++": L=8
    # started by LDA(init="kmeans++"), reported beside the rest
    sparsities: tuple[str, ...] = ("8", "4", "1", "8+kmeans++", "K")
    gibbs_sweeps: int | None = None  # the Gibbs start's sweeps; None: LDA's default
    r1_fit_docs: int | None = None  # fit on the whole corpus (None) or on the timed docs
    budget_s: float = 80.0  # wall-clock budget of one training run at (20news, K=400)
    # budget of the other (corpus, K) = budget_s * factor (smaller corpora / K are cheaper)
    budget_factors: tuple[tuple[str, float], ...] = (
        ("ap/100", 0.35),
        ("ap/400", 0.6),
        ("20news/100", 0.6),
        ("20news/400", 1.0),
    )
    hard_cap: float = 2.0  # the first pass may run past the budget, up to hard_cap * budget
    max_passes: int = 1000
    snapshot_ratio: float = 2.5  # scored snapshot when the clock grew 2.5-fold ...
    snapshot_min_gap_s: float = 3.0  # ... and by at least this many seconds, ...
    snapshot_first_passes: int = 3  # ... and every one of the first laps of L=8 and L=K
    fine_ratio: float = 1.12  # unscored snapshots in between, for the threshold bisection
    fine_min_gap_s: float = 1.0
    bisect_rounds: int = 5  # bisection rounds to pin down the threshold crossing ...
    max_scoring_s: float = 420.0  # ... (after 2 rounds) unless scoring took this long already
    ap_docs_per_batch: int = 250  # memoized batches of the AP training corpus
    n_workers: int = 2
    gensim_chunksize: int = 2000
    sklearn_batch: int = 128  # scikit-learn's default batch_size
    tomotopy_workers: int = 2
    quality_tol: float = 0.02  # nats/token below the best score ANY method reached
    same_laps_tol: float = 0.01  # row 3
    r1_targets: tuple[tuple[int, float], ...] = ((400, 3.0), (800, 5.0))
    r4_target: float = 5.0

    def budget(self, corpus: str, K: int) -> float:
        factors = dict(self.budget_factors)
        return self.budget_s * factors.get(f"{corpus}/{K}", 1.0)


FULL = Config(name="full")

QUICK = Config(
    name="quick",
    n_test=100,
    r1_docs=200,
    r1_Ks=(50, 100),
    r1_fit_laps=1,
    r1_fit_docs=1000,
    Ks=(10,),
    budget_s=4.0,
    budget_factors=(),
    max_passes=50,
    snapshot_min_gap_s=0.3,
    fine_min_gap_s=0.2,
    r1_targets=((50, 3.0), (100, 5.0)),
)


def method_label(method: str, L: str | None = None) -> str:
    return f"lsdask L={L}" if method == "lsdask" else method


def gibbs_sweeps(cfg: Config) -> int:
    """The sweeps of the Gibbs start of lsdask's runs."""
    from lsdask import config

    return config.GIBBS_SWEEPS if cfg.gibbs_sweeps is None else cfg.gibbs_sweeps


# --------------------------------------------------------------------------
# row 2: one training run of lsdask, or of a peer
# --------------------------------------------------------------------------
def train_lsdask(
    cfg: Config, data: corpora.CorpusData, K: int, L: str, client: Any, rec: Recorder
) -> dict:
    """lsdask memoized VI at sparsity L ("8", "K", "8+kmeans++" = L=8 started by
    k-means++), on the shared client, stopped by the budget before a wave or at a lap end."""
    from lsdask import LDA

    L_number, _, start = L.partition("+")
    sparsity = K if L_number == "K" else int(L_number)
    init = {"init": start} if start else {}
    executor = BudgetExecutor(client, rec, data.n_batches)
    est = LDA(
        K,
        sparsity=sparsity,
        alpha=ALPHA,
        eta=ETA,
        algorithm="memo",
        n_laps=cfg.max_passes,
        random_state=cfg.seed,
        client=executor,
        progress=False,
        gibbs_sweeps=gibbs_sweeps(cfg),
        **init,
    )
    last: dict[str, Any] = {}

    def on_lap(result: Any) -> None:
        if result.n_laps == 0:  # the Gibbs start's snapshots: laps only
            return
        glob = last["glob"] = result.globals
        stop = rec.over_budget()
        rec.pass_end(int(result.n_laps), lambda: glob.topics, force=stop)
        executor.batches_in_lap = 0
        if stop:
            executor.stopped_at_lap_end = True
            raise BudgetStop()

    rec.start()
    try:
        est.fit(data.train_path, callback=on_lap)
        reason = "converged (tol)" if getattr(est, "converged_", False) else "max passes"
        if rec.pass_ends:  # the last lap is always scored
            passes, t = rec.pass_ends[-1]
            if rec.points and rec.points[-1]["pass"] == passes:
                rec.points[-1]["primary"] = True
            else:
                rec.snapshot(passes, t, lambda: last["glob"].topics)
    except BudgetStop:
        reason = "budget"
        if not executor.stopped_at_lap_end and rec.passes >= 1 and executor.batches_in_lap > 0:
            # stopped mid-lap (lap 2 or later): score the globals of the memo as it stands
            frac = rec.passes + executor.batches_in_lap / data.n_batches
            rec.pass_end(frac, executor.current_topics, force=True)
    return {
        "stop": reason,
        "cores": cfg.n_workers,
        "cores_note": f"{cfg.n_workers} worker processes",
    }


def train(
    cfg: Config, method: str, L: str | None, data: corpora.CorpusData, K: int, client, rec
) -> dict:
    if method == "lsdask":
        return train_lsdask(cfg, data, K, L, client, rec)
    X, common = data.X_train, {"seed": cfg.seed, "max_passes": cfg.max_passes}
    if method == "gensim":
        return peers.train_gensim(X, K, rec, chunksize=cfg.gensim_chunksize, **common)
    if method == "sklearn":
        return peers.train_sklearn(X, K, rec, batch_size=cfg.sklearn_batch, **common)
    return peers.train_tomotopy(X, K, rec, workers=cfg.tomotopy_workers, **common)


def methods_for(cfg: Config) -> list[tuple[str, str | None]]:
    """Run order: lsdask runs interleaved with the peers, dense last."""
    ls = [("lsdask", L) for L in cfg.sparsities if L != "K"]
    peer_runs = [("gensim", None), ("sklearn", None), ("tomotopy", None)]
    order: list[tuple[str, str | None]] = []
    for i in range(max(len(ls), len(peer_runs))):
        if i < len(ls):
            order.append(ls[i])
        if i < len(peer_runs):
            order.append(peer_runs[i])
    if "K" in cfg.sparsities:
        order.append(("lsdask", "K"))
    return order


# --------------------------------------------------------------------------
# rows 2 and 3: one (corpus, K) configuration
# --------------------------------------------------------------------------
def warm_worker() -> bool:
    """Load (or compile) lsdask's numba kernels in a worker: local step and scoring."""
    from lsdask.evaluate import document_completion
    from lsdask.models.dirichlet_logs import DirichletPosterior
    from lsdask.models.lda import LDAModel

    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, size=(6, 30)).astype(np.float64))
    model = LDAModel(4, 30, ALPHA, ETA)
    lam = ETA + rng.random((4, 30))
    glob = DirichletPosterior.from_lam(lam, ETA)
    model.local_step(X, glob, 2)
    model.local_step(X, glob, None)
    document_completion(X, X, glob.topics, ALPHA)
    return True


def warm_driver() -> None:
    """Load lsdask's numba kernels in this process too (the Gibbs start, the global
    step and the ELBO run here): otherwise the first timed lsdask run pays for it."""
    from lsdask import LDA

    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, size=(40, 30)).astype(np.float64))
    LDA(4, sparsity=2, n_laps=2, gibbs_sweeps=2, client="sync", progress=False).fit(X)


def run_config(
    cfg: Config, data: corpora.CorpusData, K: int, client: Any, AB: tuple, snap_root: Path
) -> dict:
    """Every method's budgeted run at (corpus, K), then their snapshots scored."""
    budget = cfg.budget(data.name, K)
    snap_dir = snap_root / f"{data.name}-K{K}"
    shutil.rmtree(snap_dir, ignore_errors=True)
    snap_dir.mkdir(parents=True)
    runs: list[dict[str, Any]] = []
    for method, L in methods_for(cfg):
        label = method_label(method, L)
        rec = Recorder(
            budget,
            cfg.hard_cap,
            snap_dir,
            prefix=label.replace(" ", "_").replace("=", ""),
            first_passes=cfg.snapshot_first_passes if L in ("8", "K") else 1,
            ratio=cfg.snapshot_ratio,
            min_gap=cfg.snapshot_min_gap_s,
            fine_ratio=cfg.fine_ratio,
            fine_min_gap=cfg.fine_min_gap_s,
        )
        log(f"  {data.name} K={K}: {label} (budget {budget:.0f} s)")
        run = run_budgeted(rec, partial(train, cfg, method, L, data, K, client, rec), client)
        runs.append({"method": method, "L": L, "label": label, "budget_s": budget, **run})
    # score on the workers now that nothing else runs
    n_scored, eval_wall = score_runs(
        client,
        runs,
        AB,
        quality_tol=cfg.quality_tol,
        bisect_rounds=cfg.bisect_rounds,
        max_scoring_s=cfg.max_scoring_s,
    )
    n_saved = sum(len(r["points"]) for r in runs)
    log(f"  scored {n_scored} of {n_saved} snapshots in {eval_wall:.0f} s")
    shutil.rmtree(snap_dir, ignore_errors=True)
    drop_snapshot_paths(runs)
    res = {
        "corpus": data.name,
        "K": K,
        "budget_s": budget,
        "runs": runs,
        "eval_wall_s": eval_wall,
        "n_snapshots": n_scored,
        "n_snapshots_saved": n_saved,
    }
    summarize_config(cfg, res, data)
    return res


def summarize_config(cfg: Config, res: dict, data: corpora.CorpusData) -> None:
    """Time to quality and throughput of every run; whether L=8 was first (row 2a)
    and ended above every peer (row 2b); row 3."""
    if not time_to_quality(res, cfg.quality_tol):
        return
    runs = res["runs"]
    throughput(runs, data.n_tokens)
    by = {r["label"]: r for r in runs}
    l8 = by.get("lsdask L=8")
    peer_runs = [r for r in runs if r["method"] != "lsdask"]
    others = [r for r in runs if r["label"] != "lsdask L=8"]
    if l8 is not None:
        t8 = l8["time_to_quality_s"]

        def t(r: dict) -> float:
            return float("inf") if r["time_to_quality_s"] is None else r["time_to_quality_s"]

        res["l8_first_all"] = t8 is not None and all(t8 <= t(r) for r in others)
        res["l8_first_peers"] = t8 is not None and all(t8 <= t(r) for r in peer_runs)
        fastest = min(others, key=t) if others else None
        res["fastest_other"] = (fastest["label"], fastest["time_to_quality_s"]) if fastest else None
        finals = [r["final_score"] for r in peer_runs if r["final_score"] is not None]
        res["best_peer_final"] = max(finals) if finals else None
        res["l8_final_ge_peers"] = l8["final_score"] is not None and all(
            l8["final_score"] >= f for f in finals
        )
    res["row3"] = same_laps(cfg, by)


def same_laps(cfg: Config, by: dict[str, dict]) -> dict | None:
    """Row 3: heldout of L=8 and dense (L=K) at the last lap both reached."""
    l8, lk = by.get("lsdask L=8"), by.get("lsdask L=K")
    if l8 is None or lk is None:
        return None

    def laps(r: dict) -> dict[int, float]:
        return {
            int(p["pass"]): p["score"]
            for p in r["points"]
            if "score" in p and float(p["pass"]).is_integer()
        }

    s8, sk = laps(l8), laps(lk)
    common = sorted(set(s8) & set(sk))
    if not common:
        return {"lap": None}
    n = common[-1]
    out = {
        "lap": n,
        "L8": s8[n],
        "LK": sk[n],
        "diff": s8[n] - sk[n],
        "ok": s8[n] >= sk[n] - cfg.same_laps_tol,
        "per_lap": {str(i): {"L8": s8[i], "LK": sk[i]} for i in common},
    }
    for L in ("1", "4"):
        r = by.get(f"lsdask L={L}")
        if r is not None:
            out[f"L{L}"] = laps(r).get(n)
            out[f"L{L}_final"] = r.get("final_score")
    return out


# --------------------------------------------------------------------------
# row 1: the local step, L=8 vs dense (and its profile)
# --------------------------------------------------------------------------
def short_fit(cfg: Config, K: int, client: Any, corpus_path: str, X: sp.csr_matrix) -> Any:
    """Topics from a short lsdask fit (L=8, ``r1_fit_laps`` laps) on the corpus
    (or, with ``r1_fit_docs``, on the timed documents only: --quick)."""
    from lsdask import LDA

    est = LDA(
        K,
        sparsity=8,
        alpha=ALPHA,
        eta=ETA,
        n_laps=cfg.r1_fit_laps,
        tol=1e-12,
        batch_size=max(1, X.shape[0] // cfg.n_workers),
        random_state=cfg.seed,
        client=client,
        progress=False,
    )
    est.fit(corpus_path if cfg.r1_fit_docs is None else X[: cfg.r1_fit_docs])
    return est


def row1_local_step(cfg: Config, est: Any, X: sp.csr_matrix) -> dict[str, Any]:
    """``model.doc_topic_step`` (np.unique + gather of E[log phi] + the numba kernel),
    L=8 vs dense, restarts on (the model's defaults), interleaved, median."""
    model, glob = est.model_, est.posterior_
    L = cfg.r1_L
    out: dict[str, Any] = {
        "K": model.n_components,
        "docs": X.shape[0],
        "tokens": float(X.sum()),
        "options": asdict(model.options),
    }
    counters: dict[Any, Any] = {}

    def call(sparsity: int | None) -> Any:
        def fn() -> None:
            _, doc_topic, stats = model.doc_topic_step(X, glob, sparsity)
            counters[sparsity] = {
                "iterations": int(stats[0]),
                "restarts_tried": int(stats[1]),
                "restarts_accepted": int(stats[2]),
                "active_topics_per_doc": float((doc_topic > 1e-8).sum(1).mean()),
            }

        return fn

    small = X[:5]
    model.doc_topic_step(small, glob, L)
    model.doc_topic_step(small, glob, None)  # numba: load / compile
    with threadpool_limits(1):
        t = time_interleaved({"sparse": call(L), "dense": call(None)}, cfg.r1_repeats, warmup=0)
    sparse_s, dense_s = t["sparse"]["median_s"], t["dense"]["median_s"]
    out.update(
        {
            "samples_s": {k: v["samples_s"] for k, v in t.items()},
            "sparse_s": sparse_s,
            "dense_s": dense_s,
            "speedup": dense_s / sparse_s,
            "sparse_docs_per_s": X.shape[0] / sparse_s,
            "dense_docs_per_s": X.shape[0] / dense_s,
            "counters": {"sparse": counters.get(L), "dense": counters.get(None)},
        }
    )
    return out


def run_row1(cfg: Config, client: Any, data: corpora.CorpusData, bench: Run) -> None:
    """Row 1 (and the profiles) on the first documents of 20 Newsgroups."""
    from lsdask.io.corpus import Corpus

    corpus = Corpus.open(data.train_path)
    X = corpus.batches[0].load().to_csr(corpus.vocab_size).astype(np.float64)[: cfg.r1_docs]
    X = sp.csr_matrix(X)
    row1: dict[str, Any] = {"docs": X.shape[0], "tokens": float(X.sum()), "by_K": {}}
    bench.res["row1"] = row1

    def at(K: int) -> None:
        t0 = time.perf_counter()
        log(f"row 1: short lsdask fit at K={K} ({cfg.r1_fit_laps} laps, L=8)")
        est = short_fit(cfg, K, client, data.train_path, X)
        fit_s = time.perf_counter() - t0
        log(f"row 1: local step L={cfg.r1_L} vs dense, K={K}, {X.shape[0]} documents")
        r = row1_local_step(cfg, est, X)
        r["fit_s"] = fit_s
        log(f"  sparse {r['sparse_s']:.2f} s, dense {r['dense_s']:.2f} s: {r['speedup']:.1f}x")
        try:
            r["profile"] = profile.profile_sparse_step(est, X, cfg.r1_L, cfg.r1_repeats)
        except Exception as exc:
            r["profile"] = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"  profile failed: {exc}\n{traceback.format_exc()}")
        if K == cfg.r1_Ks[0]:
            try:
                anatomy = profile.lap_anatomy(est, client, data.train_path, cfg.r1_L, cfg.n_workers)
                r["lap_anatomy"] = anatomy
            except Exception as exc:
                r["lap_anatomy"] = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"  lap anatomy failed: {exc}\n{traceback.format_exc()}")
        row1["by_K"][str(K)] = r

    for K in cfg.r1_Ks:
        bench.step(f"row 1 K={K}", lambda K=K: at(K))
    row1["exp_ns"] = profile.exp_cost()
    bench.save_partial()


# --------------------------------------------------------------------------
# a corpus: one LocalCluster for all its runs
# --------------------------------------------------------------------------
def run_corpus(cfg: Config, data: corpora.CorpusData, snap_root: Path, bench: Run) -> None:
    log(f"{data.name}: starting a {cfg.n_workers}-worker LocalCluster")
    lc, client = cluster.local_cluster(cfg.n_workers)
    try:
        client.run(warm_worker)
        warm_driver()
        AB = (
            client.scatter(data.A, broadcast=True, hash=False),
            client.scatter(data.B, broadcast=True, hash=False),
        )
        if data.name == "20news":
            run_row1(cfg, client, data, bench)
        for K in cfg.Ks:
            bench.step(
                f"row 2 {data.name} K={K}",
                lambda K=K: bench.res["configs"].append(
                    run_config(cfg, data, K, client, AB, snap_root)
                ),
            )
    finally:
        client.close()
        lc.close()


# --------------------------------------------------------------------------
# row 4 and the report
# --------------------------------------------------------------------------
def row4(res: dict) -> dict | None:
    """Training tokens/s per core at the largest K on 20news, L=8 vs gensim."""
    confs = [c for c in res.get("configs", []) if c["corpus"] == "20news"]
    if not confs:
        return None
    conf = max(confs, key=lambda c: c["K"])
    by = {r["label"]: r for r in conf["runs"]}
    l8, gs = by.get("lsdask L=8"), by.get("gensim")
    out: dict[str, Any] = {"K": conf["K"]}
    if not (l8 and gs and l8.get("tokens_per_s_per_core") and gs.get("tokens_per_s_per_core")):
        out["ratio"] = None
        return out
    out["lsdask"] = l8["tokens_per_s_per_core"]
    out["gensim"] = gs["tokens_per_s_per_core"]
    out["ratio"] = out["lsdask"] / out["gensim"]
    out["lsdask_steady_pass_s"] = l8["steady_pass_s"]
    out["gensim_steady_pass_s"] = gs["steady_pass_s"]
    if l8.get("measured_cores") and gs.get("measured_cores"):
        a = l8["tokens_per_s"] / l8["measured_cores"]
        b = gs["tokens_per_s"] / gs["measured_cores"]
        out["ratio_measured"] = a / b
    return out


def table_rows(res: dict, cfg: Config) -> list[list[str]]:
    rows: list[list[str]] = []
    r1 = res.get("row1", {}).get("by_K", {})
    for K, target in cfg.r1_targets:
        r = r1.get(str(K))
        if r is None:
            continue
        rows.append(
            [
                f"1 (K={K})",
                f"Local step on {r['docs']:,} 20news docs, L={cfg.r1_L} vs dense (restarts on, "
                f"1 BLAS thread, median of {cfg.r1_repeats}); docs/s",
                f"{r['speedup']:.1f}x ({r['sparse_s']:.2f} s vs {r['dense_s']:.2f} s; "
                f"{r['sparse_docs_per_s']:,.0f} vs {r['dense_docs_per_s']:,.0f} docs/s)",
                f">= {target:g}x",
                check(r["speedup"] >= target),
            ]
        )
    for conf in res.get("configs", []):
        name = f"{conf['corpus']} K={conf['K']}"
        if conf.get("best") is None:
            rows.append([f"2 ({name})", "time to quality", "no scores", "", "FAIL"])
            continue
        l8 = {r["label"]: r for r in conf["runs"]}.get("lsdask L=8")
        fo = conf.get("fastest_other")
        first_all = conf.get("l8_first_all")
        rows.append(
            [
                f"2a ({name})",
                f"Time to within {cfg.quality_tol} nats/token of the best heldout score any method "
                f"reached ({conf['best']:.3f}, {conf['best_by']}); "
                f"budget {conf['budget_s']:.0f} s/run",
                f"L=8: {fmt_s(l8['time_to_quality_s'])}; fastest other: {fo[0]} {fmt_s(fo[1])}"
                if l8 and fo
                else "-",
                "L=8 first",
                check(first_all)
                + ("" if first_all else f" (vs peers only: {check(conf.get('l8_first_peers'))})"),
            ]
        )
        rows.append(
            [
                f"2b ({name})",
                "Final heldout score, L=8 vs the best peer (gensim, sklearn, tomotopy)",
                f"{fmt(l8['final_score'])} vs {fmt(conf.get('best_peer_final'))}" if l8 else "-",
                "L=8 >= every peer",
                check(conf.get("l8_final_ge_peers")),
            ]
        )
    for conf in res.get("configs", []):
        r3 = conf.get("row3")
        name = f"{conf['corpus']} K={conf['K']}"
        if not r3:
            continue
        if r3.get("lap") is None:
            rows.append(
                [
                    f"3 ({name})",
                    "L=8 vs dense (L=K) after the same laps",
                    "dense finished no lap in its budget",
                    "within 0.01",
                    "n/a",
                ]
            )
            continue
        rows.append(
            [
                f"3 ({name})",
                f"Heldout after {r3['lap']} lap(s): L=8 vs dense (L=K); L=1 reported",
                f"L=8 {r3['L8']:.3f}, dense {r3['LK']:.3f} (diff {r3['diff']:+.3f}); "
                f"L=1 {fmt(r3.get('L1'))} (final {fmt(r3.get('L1_final'))})",
                f"L=8 >= dense - {cfg.same_laps_tol}",
                check(r3["ok"]),
            ]
        )
    r4 = res.get("row4")
    if r4:
        ratio = r4.get("ratio")
        rows.append(
            [
                f"4 (20news K={r4['K']})",
                "Training tokens/s per core: lsdask L=8 (2 worker processes) vs gensim (1 process)",
                f"{ratio:.2f}x ({r4['lsdask']:,.0f} vs {r4['gensim']:,.0f} tokens/s/core; "
                f"by measured CPU: {fmt(r4.get('ratio_measured'), 2)}x)"
                if ratio is not None
                else "-",
                f">= {cfg.r4_target:g}x",
                check(ratio >= cfg.r4_target) if ratio is not None else "n/a",
            ]
        )
    return rows


def run_rows(conf: dict) -> list[list[str]]:
    """Row 2's table of every run of one (corpus, K)."""
    rows = []
    for r in conf["runs"]:
        ttq = r.get("time_to_quality_s")
        setup = "" if r.get("setup_s") is None else f" ({r['setup_s']:.1f})"
        err = f" ({r['error']})" if r.get("error") else ""
        tpc = r.get("tokens_per_s_per_core")
        at_pass = "" if ttq is None else " (" + format(r["pass_at_quality"], ".3g") + ")"
        rows.append(
            [
                r["label"],
                r.get("cores_note") or "-",
                fmt(r.get("measured_cores"), 2),
                f"{r['passes']:.3g}",
                f"{r['stop']}{err}",
                f"{r['train_s']:.1f}{setup}",
                f"{fmt_s(ttq)}{at_pass}",
                fmt(r.get("final_score")),
                fmt(r.get("best_score")),
                fmt(r.get("steady_pass_s"), 2),
                "-" if not tpc else f"{tpc:,.0f}",
            ]
        )
    return rows


def render_markdown(res: dict, cfg: Config) -> str:
    lines = header(res, f"LDA benchmark ({cfg.name})")
    lines += [
        f"Priors: alpha = {ALPHA} in total (alpha/K per topic for every method), eta = {ETA}. "
        f"Heldout: {cfg.n_test} documents per corpus, word types split 80/20 (seed {cfg.seed}), "
        "all methods scored by `lsdask.evaluate.document_completion` on their topic-word matrix. "
        f"lsdask's runs but `L=8+kmeans++` start with {gibbs_sweeps(cfg):,} collapsed Gibbs sweeps "
        "(LDA's default start, on the clock).",
        "",
    ]
    lines += table(["Row", "What", "Measured", "Target", "Result"], table_rows(res, cfg))
    lines += ["", "## Row 2: every run", ""]
    head = ["Method", "Cores", "Measured cores", "Passes", "Stopped by", "Train s (setup)"]
    head += ["Time to threshold (pass)", "Final score", "Best score", "s/pass (steady)"]
    head += ["tokens/s/core"]
    for conf in res.get("configs", []):
        lines += [
            f"### {conf['corpus']}, K={conf['K']} (budget {conf['budget_s']:.0f} s per run)",
            "",
            f"Best heldout score any method reached: {fmt(conf.get('best'))} "
            f"({conf.get('best_by')}); threshold {fmt(conf.get('threshold'))}. "
            f"{conf['n_snapshots']} of {conf.get('n_snapshots_saved')} saved snapshots scored "
            f"in {conf['eval_wall_s']:.0f} s (not on the clock).",
            "",
            *table(head, run_rows(conf)),
        ]
        r3 = conf.get("row3")
        if r3 and r3.get("per_lap"):
            per = ", ".join(
                f"lap {k}: {v['L8']:.3f} / {v['LK']:.3f}" for k, v in r3["per_lap"].items()
            )
            lines += ["", f"Row 3 detail (L=8 / dense at each common lap): {per}."]
        lines.append("")
    if res.get("row1"):
        fit_on = "20news" if cfg.r1_fit_docs is None else "the timed documents"
        lines += profile.render(res["row1"], cfg.r1_L, cfg.r1_repeats, cfg.r1_fit_laps, fit_on)
    steps = [[k, f"{v:.0f}"] for k, v in res["step_wall_s"].items()]
    lines += ["", "## Wall time per step", "", *table(["Step", "Seconds"], steps), ""]
    plots = ", ".join(f"`{p}`" for p in res.get("plots", []))
    lines.append(f"Raw numbers: `{res['json_name']}`; plots: {plots}.")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------
def run(cfg: Config, corpora_dir: Path, work_dir: Path, bench: Run) -> None:
    res = bench.res
    snap_root = work_dir / f"snapshots-{cfg.name}"
    split = {"n_test": cfg.n_test, "seed": cfg.seed, "ap_docs_per_batch": cfg.ap_docs_per_batch}
    datasets = bench.step(
        "data", lambda: corpora.load_corpora(cfg.corpora, corpora_dir, work_dir, **split)
    )
    res["data"] = {name: d.info for name, d in datasets.items()}
    for name, d in datasets.items():
        log(f"data {name}: {d.info}")
    for data in datasets.values():
        run_corpus(cfg, data, snap_root, bench)
    if "20news" not in datasets:
        log("row 1 needs 20news; skipped")
    res["row4"] = row4(res)
    res["plots"] = []
    for conf in res["configs"]:
        name = f"{bench.stem}-{conf['corpus']}-K{conf['K']}.png"
        try:
            plot_time_to_quality(conf, bench.out_dir / name)
            res["plots"].append(name)
        except Exception as exc:
            log(f"plot {name} failed: {exc}")
    shutil.rmtree(snap_root, ignore_errors=True)


def run_laps(args: argparse.Namespace, bench: Run) -> None:
    """``--laps CORPUS``: LDA() and LDA(alpha="auto") at their defaults lap after lap
    beside tomotopy (``harness.traces``), at K=``--laps-k`` and each of ``--laps-etas``."""
    quick = bool(args.quick)
    split = {"n_test": 100 if quick else 500, "seed": 0}
    data = corpora.load_corpora([args.laps], args.corpora_dir, args.work_dir, **split)[args.laps]
    bench.res["data"] = {args.laps: data.info}
    lc, client = cluster.local_cluster(2)
    try:
        bench.res["laps"] = [
            bench.step(f"laps eta={eta}", lambda eta=eta: traces.laps_part(
                data, K=args.laps_k, eta=eta, laps=3 if quick else 20,
                systems=("lda", "lda-auto"), sweeps=30 if quick else 1000,
                reference_t=5.0 if quick else 100.0, seed=0, workers=2, client=client,
                folder=args.work_dir / "laps-snapshots-lda", log=log,
            ))
            for eta in (float(x) for x in args.laps_etas.split(","))
        ]  # fmt: skip
    finally:
        client.close()
        lc.close()


def render_laps(res: dict) -> str:
    lines = header(res, "LDA benchmark: lap after lap")
    for block in res.get("laps", []):
        lines += ["", f"## {block['corpus']}, K={block['K']}, eta={block['eta']}", ""]
        lines += traces.render(block["runs"], "Heldout by wall time", block["reference_t"])
        lines += ["", *table(["What", "Measured", "Target", "Result"], traces.laps_targets(block))]
    lines += ["", f"Raw numbers: `{res['json_name']}`."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__, "small smoke run (< 3 min)")
    parser.add_argument(
        "--budget-seconds",
        type=float,
        default=None,
        help="wall-clock budget of one training run at 20news K=400 (default "
        f"{FULL.budget_s:g} s; {QUICK.budget_s:g} s with --quick); the other "
        "corpus/K pairs get a fixed fraction of it (README_lda.md)",
    )
    parser.add_argument("--corpora-dir", type=Path, default=corpora.CORPORA_DIR)
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=corpora.WORK_DIR,
        help="generated data: the AP training corpus, topic snapshots",
    )
    parser.add_argument(
        "--laps",
        metavar="CORPUS",
        default=None,
        help="instead of rows 1-4: LDA() and LDA(alpha='auto') at their defaults lap after lap "
        "beside tomotopy on CORPUS (imdb), scored under their own and a common prior "
        "(bench_hdp.py --parts laps adds the HDP)",
    )
    parser.add_argument("--laps-k", type=int, default=200)
    parser.add_argument("--laps-etas", default="0.1,0.01")
    args = parser.parse_args(argv)
    if args.laps:
        stem = f"lda-laps-{args.laps}" + ("-quick" if args.quick else "")
        bench = Run(
            __file__,
            stem,
            args.out,
            argv,
            config={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        )
        run_laps(args, bench)
        bench.finish(render_laps)
        return 0
    cfg = QUICK if args.quick else FULL
    if args.budget_seconds is not None:
        cfg = dataclasses.replace(cfg, budget_s=args.budget_seconds)
    stem = "lda-quick" if args.quick else "lda"
    bench = Run(__file__, stem, args.out, argv, config=asdict(cfg), configs=[])
    run(cfg, args.corpora_dir, args.work_dir, bench)
    bench.finish(lambda res: render_markdown(res, cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
