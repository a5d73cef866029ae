"""Benchmark of the HDP topic model with delete/merge moves and of LDA's learned priors (issue 24).

Everything is measured side by side in ONE run on the same machine, on the
LDA benchmark's corpora and heldout split (``harness.corpora``), and every
method's topics are scored by the same procedure, lsdask's
``document_completion`` (lsparse App. E), twice: with the method's OWN
document-topic prior (the HDP's ``alpha E[beta_k]``, a learned alpha vector, a
peer's own) and with a COMMON symmetric one (alpha = 0.5 in total, 0.5/K per
topic, ``harness.priors``).

Parts (``--parts``, see ``pipelines/benchmarks/README_hdp.md``):

- ``quality``: at K=100 (``--quality-k``): lsdask ``HDP`` started at 100 and
  200 topics, ``LDA(alpha="auto")``, ``LDA(alpha=0.5)`` (fixed, the reference),
  tomotopy ``LDAModel(alpha=0.5 per topic, eta, optim_interval=10)`` at K and at
  every HDP's start and final K, gensim ``HdpModel`` and tomotopy ``HDPModel``
  (a few settings each, all reported, the best by its own-prior score kept);
  final scores, final K, topics under 10 tokens, effective K (topics holding at
  least 0.5% of the tokens); ``--etas 0.1,0.01`` repeats it at eta = 0.01;
- ``cost``: every HDP lap against an LDA lap (fixed alpha, same start) at the
  HDP's current K: laps without accepted moves, the mean over the run, the
  seconds spent planning and judging moves (the ``moves:`` INFO line of logger
  ``lsdask.learn.memo`` and a timer around ``HDPModel.plan_moves``);
- ``ttq``: at K=400 (``--ttq-k``), under a wall-clock budget: ``LDA(alpha="auto")``,
  ``HDP(400)`` and tomotopy (optim_interval=10), snapshots scored with their own
  prior; time to within 0.02 nats/token of tomotopy's final score;
- ``laps``: on the movie reviews (``--laps-corpora``) at K=200 (``--laps-k``) and
  eta 0.1 and 0.01: ``LDA()``, ``LDA(alpha="auto")`` and ``HDP(200)`` at their
  defaults for up to 20 laps, and tomotopy ``LDAModel(k, eta)`` at its defaults
  (alpha 0.1 per topic re-estimated every 10 sweeps) for 1,000 sweeps, each traced
  over wall time (start included) and scored under its own and the common prior
  (``harness.traces``); lsdask with early stopping keeps its best lap, and the
  trace shows both;
- ``scale``: one HDP run of ``--scale-laps`` laps on ``bench_scale.py``'s
  synthetic corpora (0.5M and 2M documents; ``--scale-factor`` shrinks them),
  each in a fresh process: worker and driver peak RSS, small vs large.

Usage::

    python pipelines/benchmarks/bench_hdp.py --quick          # smoke run, a few minutes
    nohup python pipelines/benchmarks/bench_hdp.py --parts quality,cost \\
        --corpora 20news > data/bench_hdp.log 2>&1 &

Writes ``pipelines/benchmarks/results/hdp{,-quick}.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import shutil
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from harness import cluster, corpora, traces
from harness.budget import BudgetExecutor, BudgetStop, Recorder, run_budgeted
from harness.memory import peak_rss_kib, rss_now_kib
from harness.peers import tomotopy_add_docs
from harness.priors import ALPHA, ETA
from harness.report import check, fmt, fmt_s, header, step_times, table
from harness.run import Run, log, options
from harness.timing import lap_seconds

PARTS = ("quality", "cost", "ttq", "laps", "scale")


# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """Sizes of every part; ``FULL`` and ``QUICK`` below."""

    name: str
    seed: int = 0
    n_test: int = 500
    ap_docs_per_batch: int = 250
    corpora: tuple[str, ...] = ("20news", "ap")
    etas: tuple[float, ...] = (ETA,)
    n_workers: int = 2
    tomotopy_workers: int = 2
    # quality
    K: int = 100
    hdp_starts: tuple[int, ...] = (100, 200)
    hdp_gamma: float = 10.0  # lsdask.HDP's default
    hdp_laps: int = 20
    lda_laps: int = 20
    gibbs_sweeps: int | None = None  # None: lsdask's default start
    tomotopy_iters: int = 500  # tomotopy LDAModel sweeps (in blocks of 10) ...
    peer_budget_s: float = 150.0  # ... and every peer's wall-clock cap
    tomotopy_at_hdp_k: bool = True  # tomotopy LDAModel also at each HDP's start/final K
    gensim_hdp: tuple[tuple[tuple[str, Any], ...], ...] = (
        (),  # gensim's defaults: T=150, K=15, alpha=1, gamma=1, eta=0.01, chunksize=256
        (("eta", ETA), ("chunksize", 1000)),
    )
    tomotopy_hdp: tuple[tuple[tuple[str, Any], ...], ...] = (
        (),  # tomotopy's defaults: initial_k=2, alpha=0.1, gamma=0.1, eta=0.01
        (("initial_k", 100), ("eta", ETA)),
    )
    # cost
    cost_lda_laps: int = 6
    cost_no_move_target: float = 1.15
    cost_mean_target: float = 1.5
    # ttq
    ttq_K: int = 400
    ttq_budget_s: float = 300.0
    ttq_hard_cap: float = 2.0
    ttq_tol: float = 0.02
    ttq_time_target: float = 1.5
    # quality targets
    quality_tol: float = 0.01
    effective_share: float = 0.005
    small_tokens: float = 10.0
    # laps
    laps_corpora: tuple[str, ...] = ("imdb",)
    laps_K: int = 200
    laps_etas: tuple[float, ...] = (0.1, 0.01)
    laps_n: int = 20
    laps_systems: tuple[str, ...] = ("lda", "lda-auto", "hdp")
    laps_tomotopy_sweeps: int = 1000
    laps_reference_t: float = 100.0
    laps_fall_tol: float = 0.003
    # scale
    scale_factor: float = 1.0
    scale_laps: int = 2
    scale_K: int = 100
    scale_max_tree_gib: float = 16.0
    scale_rss_target: float = 1.10


FULL = Config(name="full")

QUICK = Config(
    name="quick",
    n_test=100,
    K=10,
    hdp_starts=(10, 20),
    hdp_laps=4,
    lda_laps=4,
    gibbs_sweeps=50,
    tomotopy_iters=50,
    peer_budget_s=8.0,
    gensim_hdp=((), (("eta", ETA), ("chunksize", 1000))),
    tomotopy_hdp=((), (("initial_k", 10), ("eta", ETA))),
    cost_lda_laps=3,
    ttq_K=20,
    ttq_budget_s=15.0,
    laps_corpora=("ap",),
    laps_K=20,
    laps_etas=(ETA,),
    laps_n=3,
    laps_tomotopy_sweeps=30,
    laps_reference_t=5.0,
)


def start_kwargs(cfg: Config) -> dict[str, Any]:
    return {} if cfg.gibbs_sweeps is None else {"gibbs_sweeps": cfg.gibbs_sweeps}


def settings_text(settings: tuple[tuple[str, Any], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings) or "defaults"


# --------------------------------------------------------------------------
# scoring and topic sizes
# --------------------------------------------------------------------------
def score_both(data: corpora.CorpusData, topics: np.ndarray, own: np.ndarray | None) -> dict:
    """Heldout score with the method's own prior vector and with alpha = 0.5/K per topic."""
    from lsdask.evaluate import document_completion

    topics = np.asarray(topics, dtype=np.float64)
    topics = topics / topics.sum(axis=1, keepdims=True)
    out = {"score_common": float(document_completion(data.A, data.B, topics, ALPHA))}
    out["score_own"] = (
        None
        if own is None
        else float(document_completion(data.A, data.B, topics, np.asarray(own, np.float64)))
    )
    return out


def topic_sizes(tokens: np.ndarray, cfg: Config) -> dict:
    """Final K, topics under ``small_tokens`` tokens, effective K (>= 0.5% of the tokens)."""
    tokens = np.asarray(tokens, dtype=np.float64)
    share = tokens / max(tokens.sum(), 1e-300)
    return {
        "K_final": int(tokens.size),
        "K_small": int((tokens < cfg.small_tokens).sum()),
        "K_effective": int((share >= cfg.effective_share).sum()),
        "largest_share": float(share.max()) if tokens.size else None,
    }


# --------------------------------------------------------------------------
# lsdask's moves, as it logs and plans them
# --------------------------------------------------------------------------
MOVES_RE = re.compile(
    r"moves: (\d+)/(\d+) deletes, (\d+)/(\d+) merges accepted; K=(\d+); "
    r"objective (\S+) -> (\S+).*\(([\d.]+) s\)$"
)
LAP_RE = re.compile(r"^lap (\d+): ")


class MoveLog(logging.Handler):
    """Collects the ``moves:`` line of every lap (logger ``lsdask.learn.memo``) and
    files it under the lap whose ``lap N:`` line follows it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.laps: dict[int, dict] = {}
        self.pending: dict | None = None

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        m = MOVES_RE.search(msg)
        if m:
            g = m.groups()
            self.pending = {
                "deletes_accepted": int(g[0]),
                "deletes_tried": int(g[1]),
                "merges_accepted": int(g[2]),
                "merges_tried": int(g[3]),
                "K_after": int(g[4]),
                "objective_before": float(g[5]),
                "objective_after": float(g[6]),
                "judge_s": float(g[7]),
            }
            return
        m = LAP_RE.search(msg)
        if m and self.pending is not None:
            self.laps[int(m.group(1))] = self.pending
            self.pending = None


#: (lap, seconds, delete candidates, merge pairs) of every ``HDPModel.plan_moves`` call
PLANS: list[dict] = []


def instrument_plans() -> None:
    """A timer around ``HDPModel.plan_moves`` (in this process, the driver, where the
    memoized learner calls it at a lap's start); measurement only."""
    from lsdask.models.hdp import HDPModel

    orig = HDPModel.plan_moves
    if getattr(orig, "bench_timed", False):
        return

    def plan_moves(self: Any, stats: Any, glob: Any, lap: int) -> Any:
        t0 = time.perf_counter()
        out = orig(self, stats, glob, lap)
        plan = getattr(out, "plan", None)
        PLANS.append(
            {
                "lap": int(lap),
                "s": time.perf_counter() - t0,
                "deletes": 0 if plan is None else len(plan.deletes),
                "pairs": 0 if plan is None else sum(1 for j, _ in plan.pairs if j >= 0),
            }
        )
        return out

    plan_moves.bench_timed = True  # type: ignore[attr-defined]
    HDPModel.plan_moves = plan_moves  # type: ignore[method-assign]


class capture_moves:
    """``with capture_moves() as moves:``: the memo learner's INFO lines collected."""

    def __enter__(self) -> MoveLog:
        self.logger = logging.getLogger("lsdask.learn.memo")
        self.level = self.logger.level
        self.handler = MoveLog()
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        PLANS.clear()
        return self.handler

    def __exit__(self, *exc: Any) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)


# --------------------------------------------------------------------------
# lsdask runs
# --------------------------------------------------------------------------
def lsdask_run(
    cfg: Config, data: corpora.CorpusData, client: Any, kind: str, K: int, eta: float, laps: int
) -> dict:
    """One lsdask fit to ``laps`` laps (or convergence): ``kind`` is "hdp",
    "lda-auto" (alpha="auto") or "lda" (alpha = 0.5 in total, fixed)."""
    from lsdask import HDP, LDA

    common = dict(
        sparsity=8,
        eta=eta,
        n_laps=laps,
        random_state=cfg.seed,
        client=client,
        progress=False,
        **start_kwargs(cfg),
    )
    if kind == "hdp":
        est = HDP(K, alpha=ALPHA, gamma=cfg.hdp_gamma, moves=("delete", "merge"), **common)
        label = f"lsdask HDP (start {K})"
        settings = f"HDP({K}, sparsity=8, alpha={ALPHA}, gamma={cfg.hdp_gamma}, eta={eta})"
    elif kind == "lda-auto":
        est = LDA(K, alpha="auto", **common)
        label, settings = f"lsdask LDA alpha=auto (K={K})", f'LDA({K}, alpha="auto", eta={eta})'
    else:
        est = LDA(K, alpha=ALPHA, **common)
        label, settings = f"lsdask LDA alpha=0.5 (K={K})", f"LDA({K}, alpha={ALPHA}, eta={eta})"
    log(f"  {data.name} eta={eta}: {label}, {laps} laps")
    instrument_plans()
    t0 = time.perf_counter()
    with capture_moves() as moves:
        est.fit(data.train_path)
    wall = time.perf_counter() - t0
    laps_s = lap_seconds(est)
    learn_s = float(est.time_trace_[-1])
    out: dict[str, Any] = {
        "label": label,
        "method": "lsdask",
        "kind": kind,
        "settings": settings + ", memoized VI, 2 workers",
        "K_start": K,
        "eta": eta,
        "laps": int(est.n_laps_),
        "converged": bool(getattr(est, "converged_", False)),
        "wall_s": wall,
        "start_s": wall - learn_s,  # the start (Gibbs sweeps) and the fit's set-up
        "lap_s": laps_s,
        "elbo_trace": [float(x) for x in est.elbo_trace_],
        "lap_trace": [float(x) for x in est.lap_trace_],
        "time_trace": [float(x) for x in est.time_trace_],
    }
    own = np.asarray(est.alpha_, dtype=np.float64)
    out["own_prior_total"] = float(own.sum())
    out["own_prior_max_share"] = float(own.max() / own.sum())
    if kind == "hdp":
        out["K_trace"] = [int(k) for k in est.n_components_trace_]
        out["moves"] = {str(k): v for k, v in sorted(moves.laps.items())}
        out["plans"] = list(PLANS)
        out["leftover_weight"] = float(est.leftover_weight_)
    out.update(topic_sizes(est.stats_.array("N"), cfg))
    out.update(score_both(data, est.topic_word_, own))
    log(
        f"    {out['laps']} laps in {wall:.0f} s (start {out['start_s']:.0f} s), K "
        f"{out['K_final']}, own {fmt(out['score_own'])}, common {fmt(out['score_common'])}"
    )
    return out


# --------------------------------------------------------------------------
# peers
# --------------------------------------------------------------------------
def tomotopy_topics(mdl: Any, V: int, eta: float) -> np.ndarray:
    """(k, V) topic-word pseudo-counts of a tomotopy LDA model over the whole
    vocabulary (eta for words it never saw)."""
    ids = np.array([int(w) for w in mdl.used_vocabs], dtype=np.int64)
    lam = np.full((mdl.k, V), eta)
    for k in range(mdl.k):
        lam[k, ids] = np.asarray(mdl.get_topic_word_dist(k, normalize=False), dtype=np.float64)
    return lam


def train_tomotopy_iters(mdl: Any, cfg: Config, max_iters: int) -> tuple[int, float]:
    """Sweeps in blocks of 10 until ``max_iters`` or the peer budget; (sweeps, seconds)."""
    t0, done = time.perf_counter(), 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while done < max_iters and time.perf_counter() - t0 < cfg.peer_budget_s:
            mdl.train(10, workers=cfg.tomotopy_workers)
            done += 10
    return done, time.perf_counter() - t0


def tomotopy_lda_run(cfg: Config, data: corpora.CorpusData, K: int, eta: float) -> dict:
    """tomotopy ``LDAModel(k=K, alpha=0.5, eta)``: alpha 0.5 PER TOPIC at the start,
    re-estimated as a vector every 10 sweeps (``optim_interval=10``, its default)."""
    import tomotopy as tp

    label = f"tomotopy LDAModel optim_interval=10 (K={K})"
    log(f"  {data.name} eta={eta}: {label}")
    mdl = tp.LDAModel(k=K, alpha=ALPHA, eta=eta, seed=cfg.seed)
    mdl.optim_interval = 10
    tomotopy_add_docs(mdl, data.X_train)
    iters, secs = train_tomotopy_iters(mdl, cfg, cfg.tomotopy_iters)
    own = np.asarray(mdl.alpha, dtype=np.float64)
    out = {
        "label": label,
        "method": "tomotopy",
        "kind": "lda",
        "settings": f"LDAModel(k={K}, alpha={ALPHA} per topic, eta={eta}, seed={cfg.seed}), "
        f"optim_interval=10, burn_in=0, train(10, workers={cfg.tomotopy_workers}) x {iters // 10}",
        "K_start": K,
        "eta": eta,
        "iters": iters,
        "wall_s": secs,
        "own_prior_total": float(own.sum()),
        "own_prior_max_share": float(own.max() / own.sum()),
    }
    out.update(topic_sizes(np.asarray(mdl.get_count_by_topics(), np.float64), cfg))
    out.update(score_both(data, tomotopy_topics(mdl, data.vocab_size, eta), own))
    log(f"    {iters} sweeps in {secs:.0f} s, own {fmt(out['score_own'])}, "
        f"common {fmt(out['score_common'])}, alpha total {out['own_prior_total']:.2f}")  # fmt: skip
    return out


def tomotopy_hdp_run(
    cfg: Config, data: corpora.CorpusData, settings: tuple[tuple[str, Any], ...]
) -> dict:
    """tomotopy ``HDPModel(**settings)`` (Gibbs sampling; alpha and gamma re-estimated
    every 10 sweeps by default); scored through ``convert_to_lda(0)``: its live topics
    and their prior vector."""
    import tomotopy as tp

    kw = dict(settings)
    label = f"tomotopy HDPModel ({settings_text(settings)})"
    log(f"  {data.name}: {label}")
    mdl = tp.HDPModel(seed=cfg.seed, **kw)
    tomotopy_add_docs(mdl, data.X_train)
    iters, secs = train_tomotopy_iters(mdl, cfg, cfg.tomotopy_iters)
    lda, _ = mdl.convert_to_lda(topic_threshold=0.0)
    own = np.asarray(lda.alpha, dtype=np.float64)
    out = {
        "label": label,
        "method": "tomotopy-hdp",
        "kind": "hdp",
        "settings": f"HDPModel({settings_text(settings)}, seed={cfg.seed}), "
        f"train(10, workers={cfg.tomotopy_workers}) x {iters // 10}",
        "eta": float(mdl.eta),
        "iters": iters,
        "wall_s": secs,
        "k_allocated": int(mdl.k),
        "live_k": int(mdl.live_k),
        "learned_alpha": float(mdl.alpha),
        "learned_gamma": float(mdl.gamma),
        "own_prior_total": float(own.sum()),
    }
    out.update(topic_sizes(np.asarray(lda.get_count_by_topics(), np.float64), cfg))
    out.update(score_both(data, tomotopy_topics(lda, data.vocab_size, float(mdl.eta)), own))
    log(f"    {iters} sweeps in {secs:.0f} s, live K {out['live_k']}, effective "
        f"{out['K_effective']}, own {fmt(out['score_own'])}")  # fmt: skip
    return out


def gensim_hdp_run(
    cfg: Config, data: corpora.CorpusData, settings: tuple[tuple[str, Any], ...]
) -> dict:
    """gensim ``HdpModel(corpus, id2word, max_time=peer budget, random_state, **settings)``
    (online VI, passes over the corpus until ``max_time``); scored through
    ``hdp_to_lda()``: its T topics and its prior vector."""
    from gensim.models import HdpModel
    from harness.peers import gensim_bow

    label = f"gensim HdpModel ({settings_text(settings)})"
    log(f"  {data.name}: {label}")
    bow = gensim_bow(data.X_train)
    logging.getLogger("gensim").setLevel(logging.WARNING)
    t0 = time.perf_counter()
    mdl = HdpModel(
        bow,
        id2word={i: str(i) for i in range(data.vocab_size)},
        max_time=cfg.peer_budget_s,
        random_state=cfg.seed,
        **dict(settings),
    )
    secs = time.perf_counter() - t0
    own, topics = mdl.hdp_to_lda()
    # gensim keeps no token counts; its topics' sizes are its stick weights (``own``
    # is alpha times them), reported beside the mass of its lambda (which still
    # holds part of its random initialization after a pass or two)
    lam_mass = np.asarray(mdl.m_lambda_sum, dtype=np.float64)
    out = {
        "label": label,
        "method": "gensim-hdp",
        "kind": "hdp",
        "settings": f"HdpModel({settings_text(settings)}, max_time={cfg.peer_budget_s:g}, "
        f"random_state={cfg.seed})",
        "eta": float(mdl.m_eta),
        "wall_s": secs,
        "docs_processed": int(mdl.m_num_docs_processed),
        "passes": mdl.m_num_docs_processed / data.X_train.shape[0],
        "own_prior_total": float(np.sum(own)),
    }
    out.update(topic_sizes(np.asarray(own, np.float64), cfg))
    out["K_effective_lambda"] = topic_sizes(lam_mass, cfg)["K_effective"]
    out.update(score_both(data, np.asarray(topics), np.asarray(own, np.float64)))
    log(f"    {out['passes']:.1f} passes in {secs:.0f} s, effective K {out['K_effective']}, "
        f"own {fmt(out['score_own'])}")  # fmt: skip
    return out


def safe(fn: Any, label: str) -> dict:
    """A run's result, or its error (the other runs go on)."""
    try:
        return fn()
    except Exception as exc:
        log(f"    ERROR {label}: {exc}\n{traceback.format_exc()}")
        return {"label": label, "error": f"{type(exc).__name__}: {exc}"}


# --------------------------------------------------------------------------
# part 1 (quality) and part 2 (cost) on one corpus
# --------------------------------------------------------------------------
def warm_worker() -> bool:
    """Load lsdask's numba kernels in a worker (LDA's and the HDP's, the scorer's)."""
    from lsdask import HDP, LDA
    from lsdask.evaluate import document_completion

    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, size=(60, 30)).astype(np.float64))
    kw = dict(sparsity=2, n_laps=3, gibbs_sweeps=2, client="sync", progress=False)
    LDA(4, **kw).fit(X)
    LDA(4, alpha="auto", **kw).fit(X)
    HDP(6, **kw).fit(X)
    document_completion(X, X, np.full((4, 30), 1 / 30), ALPHA)
    return True


def quality_and_cost(
    cfg: Config, data: corpora.CorpusData, client: Any, parts: set[str], bench: Run
) -> dict:
    res: dict[str, Any] = {"corpus": data.name, "by_eta": {}}
    bench.res["corpora"].append(res)  # in the partial record as it fills
    for eta in cfg.etas:
        runs: list[dict] = []
        res["by_eta"][str(eta)] = {"eta": eta, "runs": runs}
        key = f"{data.name} eta={eta}"

        def add(fn: Any, label: str, key: str = key, runs: list = runs) -> dict:
            r = bench.step(f"{key}: {label}", lambda: safe(fn, label))
            runs.append(r)
            bench.save_partial()
            return r

        def ls(kind: str, K: int, laps: int, e: float = eta) -> Any:
            return lambda: lsdask_run(cfg, data, client, kind, K, e, laps)

        hdps = [add(ls("hdp", K, cfg.hdp_laps), f"HDP {K}") for K in cfg.hdp_starts]
        if "quality" in parts:
            add(
                ls("lda-auto", cfg.K, cfg.lda_laps),
                "LDA auto",
            )
        # LDA with the fixed prior at every K an HDP ran at: the cost reference
        lda_Ks = sorted(
            {cfg.K}
            | {h["K_start"] for h in hdps if "error" not in h}
            | {h["K_final"] for h in hdps if "error" not in h}
        )
        # (the one at the quality K runs as long as LDA alpha=auto; the others
        # only the few laps the cost part needs)
        for K in lda_Ks if "cost" in parts else [cfg.K]:
            laps = cfg.lda_laps if K == cfg.K and "quality" in parts else cfg.cost_lda_laps
            add(ls("lda", K, laps), f"LDA {K}")
        if "quality" in parts:
            tomo_Ks = lda_Ks if cfg.tomotopy_at_hdp_k else [cfg.K]
            for K in tomo_Ks:
                add(lambda K=K, e=eta: tomotopy_lda_run(cfg, data, K, e), f"tomotopy LDA {K}")
            if eta == cfg.etas[0]:  # the HDP peers' own eta is one of their settings
                for s in cfg.gensim_hdp:
                    add(lambda s=s: gensim_hdp_run(cfg, data, s), f"gensim HDP {settings_text(s)}")
                for s in cfg.tomotopy_hdp:
                    add(
                        lambda s=s: tomotopy_hdp_run(cfg, data, s),
                        f"tomotopy HDP {settings_text(s)}",
                    )
        summarize_quality(cfg, res["by_eta"][str(eta)])
        if "cost" in parts:
            costs = [cost_of(cfg, h, runs) for h in hdps if "error" not in h]
            res["by_eta"][str(eta)]["cost"] = costs
    return res


def summarize_quality(cfg: Config, block: dict) -> None:
    """Targets of the quality part: every lsdask HDP / LDA-auto run against tomotopy
    at its start and final K (-0.01), and above both HDP peers' best."""
    runs = [r for r in block["runs"] if "error" not in r]
    tomo = {r["K_start"]: r for r in runs if r["method"] == "tomotopy"}
    peers_best = {}
    for m in ("gensim-hdp", "tomotopy-hdp"):
        cands = [r for r in runs if r["method"] == m and r.get("score_own") is not None]
        if cands:
            best = max(cands, key=lambda r: r["score_own"])
            peers_best[m] = best["label"]
            best["best_of_peer"] = True
    block["peers_best"] = peers_best
    best_peer_scores = {
        m: max(r["score_own"] for r in runs if r["label"] == lab) for m, lab in peers_best.items()
    }
    for r in runs:
        if r["method"] != "lsdask" or r["kind"] == "lda":
            continue
        checks = {}
        for which in ("K_start", "K_final"):
            t = tomo.get(r[which])
            if t is not None:
                checks[f"vs_tomotopy_{which}"] = {
                    "K": r[which],
                    "tomotopy": t["score_own"],
                    "diff": r["score_own"] - t["score_own"],
                    "ok": r["score_own"] >= t["score_own"] - cfg.quality_tol,
                }
        for m, s in best_peer_scores.items():
            checks[f"vs_{m}"] = {"peer": s, "diff": r["score_own"] - s, "ok": r["score_own"] > s}
        r["checks"] = checks


def cost_of(cfg: Config, hdp: dict, runs: list[dict]) -> dict:
    """Each HDP lap (2 on) against an LDA lap at the K the HDP had during it (steady
    median of the fixed-alpha LDA run at that K; linear in K between measured Ks)."""
    ref = {
        r["K_start"]: float(np.median(r["lap_s"][1:]))
        for r in runs
        if r.get("kind") == "lda" and r.get("method") == "lsdask" and len(r.get("lap_s", [])) > 1
    }
    if not ref:
        return {"label": hdp["label"], "error": "no LDA reference lap"}
    Ks = np.array(sorted(ref))
    secs = np.array([ref[k] for k in Ks])
    K_during = [hdp["K_start"], *hdp["K_trace"][:-1]]
    moves = hdp.get("moves", {})
    plans = {p["lap"]: p for p in hdp.get("plans", [])}
    judge = {int(k): v.get("judge_s", 0.0) for k, v in moves.items()}
    laps = []
    for n in range(2, len(hdp["lap_s"]) + 1):
        K = K_during[n - 1]
        lda = float(np.interp(K, Ks, secs))
        mv = moves.get(str(n), {})
        accepted = mv.get("deletes_accepted", 0) + mv.get("merges_accepted", 0)
        # the traces' lap n ends at its last wave: the lap's end (global step, the
        # moves' judgement) falls into the next span; move the judgement back
        hdp_s = hdp["lap_s"][n - 1] - judge.get(n - 1, 0.0) + judge.get(n, 0.0)
        laps.append(
            {
                "lap": n,
                "K": K,
                "hdp_s": hdp_s,
                "lda_s": lda,
                "ratio": hdp_s / lda,
                "ratio_without_moves": (hdp_s - judge.get(n, 0.0) - plans.get(n, {}).get("s", 0.0))
                / lda,
                "accepted": accepted,
                "judge_s": mv.get("judge_s", 0.0),
                "plan_s": plans.get(n, {}).get("s", 0.0),
                "exact_K": bool(K in ref),
            }
        )
    quiet = [x["ratio"] for x in laps if x["accepted"] == 0]
    hdp_total = sum(x["hdp_s"] for x in laps)
    out = {
        "label": hdp["label"],
        "lda_ref": {str(k): v for k, v in ref.items()},
        "laps": laps,
        "no_move_laps": len(quiet),
        "no_move_ratio_median": float(np.median(quiet)) if quiet else None,
        "no_move_ratio_max": float(np.max(quiet)) if quiet else None,
        "mean_ratio": hdp_total / sum(x["lda_s"] for x in laps) if laps else None,
        "moves_s": sum(x["judge_s"] + x["plan_s"] for x in laps),
        "ratio_without_moves_median": (
            float(np.median([x["ratio_without_moves"] for x in laps])) if laps else None
        ),
        "hdp_laps_s": hdp_total,
        "first_lap_hdp_s": hdp["lap_s"][0],
    }
    if out["no_move_ratio_median"] is not None:
        out["no_move_ok"] = out["no_move_ratio_median"] <= cfg.cost_no_move_target
    if out["mean_ratio"] is not None:
        out["mean_ok"] = out["mean_ratio"] <= cfg.cost_mean_target
    return out


# --------------------------------------------------------------------------
# part 3: time to quality at K=400
# --------------------------------------------------------------------------
class PriorRecorder(Recorder):
    """A :class:`Recorder` whose snapshots hold the topics AND the method's own prior
    vector (``topics()`` returns both), so that each is scored with its own prior."""

    def snapshot(self, passes: float, t: float, topics: Any, primary: bool = True) -> None:
        s = time.perf_counter()
        path = self.snap_dir / f"{self.prefix}-{len(self.points):03d}.npz"
        tw, alpha = topics()
        np.savez(path, topics=np.asarray(tw, np.float32), alpha=np.asarray(alpha, np.float64))
        self.points.append(
            {"pass": float(passes), "t": float(t), "path": str(path), "primary": primary}
        )
        self.excluded += time.perf_counter() - s


def ttq_lsdask(cfg: Config, data: corpora.CorpusData, kind: str, client: Any, rec: Recorder):
    from lsdask import HDP, LDA

    executor = BudgetExecutor(client, rec, data.n_batches)
    common = dict(
        sparsity=8,
        eta=ETA,
        n_laps=1000,
        random_state=cfg.seed,
        client=executor,
        progress=False,
        **start_kwargs(cfg),
    )
    K = cfg.ttq_K
    if kind == "hdp":
        est = HDP(K, alpha=ALPHA, gamma=cfg.hdp_gamma, **common)
    else:
        est = LDA(K, alpha="auto", **common)

    def on_lap(result: Any) -> None:
        if result.n_laps == 0:  # the Gibbs start's snapshots: laps only
            return
        glob = result.globals
        stop = rec.over_budget()
        rec.pass_end(int(result.n_laps), lambda: (glob.topics, glob.alpha), force=stop)
        executor.batches_in_lap = 0
        if stop:
            raise BudgetStop()

    rec.start()
    reason = "max passes"
    try:
        est.fit(data.train_path, callback=on_lap)
        if getattr(est, "converged_", False):
            reason = "converged (tol)"
    except BudgetStop:
        reason = "budget"  # a stop mid-lap keeps the last lap's snapshot
    if rec.points:
        rec.points[-1]["primary"] = True
    return {"stop": reason, "cores": cfg.n_workers, "cores_note": f"{cfg.n_workers} workers"}


def ttq_tomotopy(cfg: Config, data: corpora.CorpusData, rec: Recorder) -> dict:
    import tomotopy as tp

    K = cfg.ttq_K
    mdl = tp.LDAModel(k=K, alpha=ALPHA, eta=ETA, seed=cfg.seed)
    mdl.optim_interval = 10
    tomotopy_add_docs(mdl, data.X_train)
    rec.start()
    reason = "max passes"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p in range(10, cfg.tomotopy_iters * 4 + 1, 10):
            mdl.train(10, workers=cfg.tomotopy_workers)
            stop = rec.over_budget()
            rec.pass_end(
                p,
                lambda: (tomotopy_topics(mdl, data.vocab_size, ETA), np.asarray(mdl.alpha)),
                force=stop,
            )
            if stop:
                reason = "budget"
                break
    if rec.points:
        rec.points[-1]["primary"] = True
    return {"stop": reason, "cores": cfg.tomotopy_workers, "cores_note": "workers=2 threads"}


def ttq_part(cfg: Config, data: corpora.CorpusData, client: Any, work_dir: Path) -> dict:
    """Budgeted runs at K = ttq_K; every primary snapshot scored with its own prior."""
    snap_dir = work_dir / f"hdp-snapshots-{cfg.name}"
    shutil.rmtree(snap_dir, ignore_errors=True)
    snap_dir.mkdir(parents=True)
    budget = cfg.ttq_budget_s
    runs = []
    plan = [
        ("tomotopy LDAModel optim_interval=10", "tomotopy"),
        ('lsdask LDA alpha="auto"', "lda-auto"),
        (f"lsdask HDP (start {cfg.ttq_K})", "hdp"),
    ]
    for label, kind in plan:
        rec = PriorRecorder(
            budget,
            cfg.ttq_hard_cap,
            snap_dir,
            prefix=kind,
            first_passes=1,
            ratio=1.5,
            min_gap=max(2.0, budget / 20),
            fine_ratio=1e9,
            fine_min_gap=1e9,
        )
        log(f"  {data.name} K={cfg.ttq_K}: {label} (budget {budget:.0f} s)")
        if kind == "tomotopy":
            fn = lambda rec=rec: ttq_tomotopy(cfg, data, rec)  # noqa: E731
        else:
            fn = lambda rec=rec, kind=kind: ttq_lsdask(cfg, data, kind, client, rec)  # noqa: E731
        run = run_budgeted(rec, fn, client)
        runs.append({"label": label, "kind": kind, **run})
    t0 = time.perf_counter()
    A_f = client.scatter(data.A, broadcast=True, hash=False)
    B_f = client.scatter(data.B, broadcast=True, hash=False)
    futs = [
        (r, p, client.submit(traces.score_npz, p["path"], A_f, B_f, pure=False))
        for r in runs
        for p in r["points"]
        if p["primary"]
    ]
    for _, p, f in futs:
        p["score_own"], p["score_common"] = f.result()
    scoring_s = time.perf_counter() - t0
    shutil.rmtree(snap_dir, ignore_errors=True)
    for r in runs:
        r["points"] = [
            {k: v for k, v in p.items() if k != "path"} for p in r["points"] if "score_own" in p
        ]
        r["final_own"] = r["points"][-1]["score_own"] if r["points"] else None
        r["final_common"] = r["points"][-1]["score_common"] if r["points"] else None
    tomo = runs[0]
    out: dict[str, Any] = {"K": cfg.ttq_K, "budget_s": budget, "runs": runs, "scoring_s": scoring_s}
    if tomo["final_own"] is not None:
        thr = tomo["final_own"] - cfg.ttq_tol
        out["threshold"] = thr
        for r in runs:
            hit = next((p for p in r["points"] if p["score_own"] >= thr), None)
            r["time_to_quality_s"] = None if hit is None else hit["t"]
        t_tomo = tomo["time_to_quality_s"]
        lda = runs[1]
        if t_tomo and lda.get("time_to_quality_s") is not None:
            out["lda_ratio"] = lda["time_to_quality_s"] / t_tomo
            out["lda_ok"] = out["lda_ratio"] <= cfg.ttq_time_target
        else:
            out["lda_ok"] = False if t_tomo else None
    return out


# --------------------------------------------------------------------------
# laps: heldout lap after lap on the movie reviews (harness.traces)
# --------------------------------------------------------------------------
def laps_blocks(cfg: Config, args: argparse.Namespace, split: dict, client: Any) -> list[dict]:
    """One :func:`harness.traces.laps_part` per corpus and eta."""
    blocks = []
    for name in cfg.laps_corpora:
        data = corpora.load_corpora([name], args.corpora_dir, args.work_dir, **split)[name]
        for eta in cfg.laps_etas:
            blocks.append(traces.laps_part(
                data, K=cfg.laps_K, eta=eta, laps=cfg.laps_n, systems=cfg.laps_systems,
                sweeps=cfg.laps_tomotopy_sweeps, reference_t=cfg.laps_reference_t,
                seed=cfg.seed, workers=cfg.tomotopy_workers, client=client,
                folder=args.work_dir / f"laps-snapshots-{cfg.name}", log=log,
            ))  # fmt: skip
    return blocks


# --------------------------------------------------------------------------
# part 4: one HDP run on bench_scale's corpora, in a fresh process
# --------------------------------------------------------------------------
def warm_scale(X: sp.csr_matrix, K: int) -> None:
    """Load the HDP's kernels in this process: a tiny in-process fit."""
    from lsdask import HDP

    kw = dict(sparsity=8, n_laps=2, init="random", random_state=0, progress=False)
    HDP(K, client="sync", **kw).fit(X)


def scale_child(args: argparse.Namespace) -> None:
    """Start a LocalCluster, fit the HDP for ``--laps`` laps, print one JSON line."""
    import lsdask
    from lsdask.io.corpus import Corpus

    t0 = time.perf_counter()
    lc, client = cluster.local_cluster(args.workers)
    setup_s = time.perf_counter() - t0
    with lc, client:
        start = client.run(peak_rss_kib)
        corpus = Corpus.open(args.data)
        X = corpus.batches[0].load().to_csr(corpus.vocab_size)
        client.run(warm_scale, X, args.k)
        warm_scale(X[:200], args.k)  # the driver's kernels
        driver_before = peak_rss_kib()
        est = lsdask.HDP(
            args.k, sparsity=8, n_laps=args.laps, init="kmeans++", random_state=0,
            client=client, progress=False, checkpoint_dir=args.memo_dir,
        )  # fmt: skip
        t1 = time.perf_counter()
        est.fit(args.data)
        fit_s = time.perf_counter() - t1
        workers = client.run(peak_rss_kib)
        workers_now = client.run(rss_now_kib)
    cluster.emit(
        {
            "n_docs": corpus.n_docs,
            "n_tokens": corpus.n_tokens,
            "K": args.k,
            "laps": int(est.n_laps_),
            "K_final": int(est.n_components_),
            "cluster_start_s": setup_s,
            "fit_wall_s": fit_s,
            "lap_s": lap_seconds(est),
            "worker_start_kib": sorted(start.values()),
            "worker_peak_kib": sorted(workers.values()),
            "worker_end_kib": sorted(workers_now.values()),
            "driver_peak_before_fit_kib": driver_before,
            "driver_peak_kib": peak_rss_kib(),
        }
    )


def scale_part(cfg: Config, quick: bool, work_dir: Path) -> dict:
    import bench_scale

    base = bench_scale.QUICK if quick else bench_scale.FULL
    scfg = base if cfg.scale_factor >= 1 else bench_scale.scaled(base, cfg.scale_factor)
    out: dict[str, Any] = {"docs": list(scfg.lda_docs), "laps": cfg.scale_laps, "K": cfg.scale_K}
    for name, n in zip(("small", "large"), scfg.lda_docs, strict=True):
        path, info = bench_scale.ensure_corpus(scfg, work_dir, n)
        memo = work_dir / f"hdp-memo-{name}"
        shutil.rmtree(memo, ignore_errors=True)
        cmd = [
            sys.executable, __file__, "--child-scale", "--data", str(path), "--k",
            str(cfg.scale_K), "--laps", str(cfg.scale_laps), "--workers", str(cfg.n_workers),
            "--memo-dir", str(memo),
        ]  # fmt: skip
        log(f"  scale {name}: {n:,} documents, HDP({cfg.scale_K}), {cfg.scale_laps} laps")
        fresh = cluster.run_fresh(cmd, cfg.scale_max_tree_gib)
        shutil.rmtree(memo, ignore_errors=True)
        if fresh.result is None:
            out[name] = {"failed": fresh.failed, "stderr_tail": fresh.stderr[-3000:]}
            log(f"    FAILED {fresh.failed}")
            continue
        out[name] = {**fresh.result, "corpus": info, "tree_peak_bytes": fresh.tree_peak_bytes}
        r = out[name]
        log(f"    laps {[round(x, 1) for x in r['lap_s']]} s, worker peaks "
            f"{[k // 1024 for k in r['worker_peak_kib']]} MiB, driver "
            f"{r['driver_peak_kib'] // 1024} MiB")  # fmt: skip
    s, lg = out.get("small", {}), out.get("large", {})
    if "worker_peak_kib" in s and "worker_peak_kib" in lg:
        out["worker_growth"] = max(lg["worker_peak_kib"]) / max(s["worker_peak_kib"])
        out["driver_growth"] = lg["driver_peak_kib"] / s["driver_peak_kib"]
        out["ok"] = max(out["worker_growth"], out["driver_growth"]) <= cfg.scale_rss_target
    return out


# --------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------
def k_cell(r: dict) -> str:
    if r["method"] == "lsdask" and r["kind"] == "hdp":
        return f"{r['K_start']} -> {r['K_final']} ({r['K_small']} < 10 tok)"
    if r["method"] == "tomotopy-hdp":
        return f"live {r['live_k']} of {r['k_allocated']}"
    if r["method"] == "gensim-hdp":
        return f"T={r['K_final']} (by lambda mass: {r['K_effective_lambda']} effective)"
    return str(r["K_final"])


def time_cell(r: dict) -> str:
    if r["method"] == "lsdask":
        return f"{r['wall_s']:.0f} (start {r['start_s']:.0f}; {r['laps']} laps)"
    if "iters" in r:
        return f"{r['wall_s']:.0f} ({r['iters']} sweeps)"
    return f"{r['wall_s']:.0f} ({r.get('passes', 0):.1f} passes)"


def quality_rows(block: dict) -> list[list[str]]:
    rows = []
    for r in block["runs"]:
        if "error" in r:
            rows.append([r["label"], f"ERROR {r['error']}", *["-"] * 6])
            continue
        best = " (best)" if r.get("best_of_peer") else ""
        rows.append(
            [
                r["label"] + best,
                fmt(r.get("score_own")),
                fmt(r.get("score_common")),
                k_cell(r),
                str(r["K_effective"]),
                f"{r.get('largest_share', 0):.3f}",
                fmt(r.get("own_prior_total"), 2),
                time_cell(r),
            ]
        )
    return rows


def target_rows(res: dict, cfg: Config) -> list[list[str]]:
    rows = []
    for corpus in res.get("corpora", []):
        for eta_key, block in corpus["by_eta"].items():
            name = f"{corpus['corpus']}, eta={eta_key}"
            for r in block["runs"]:
                for key, c in (r.get("checks") or {}).items():
                    what = key.replace("vs_", "vs ").replace("_", " ")
                    rows.append(
                        [
                            f"Quality ({name})",
                            f"{r['label']} {what}" + (f" (K={c['K']})" if "K" in c else ""),
                            f"{r['score_own']:.3f} vs {c.get('tomotopy', c.get('peer')):.3f} "
                            f"({c['diff']:+.3f})",
                            f">= tomotopy - {cfg.quality_tol}" if "tomotopy" in c else "> peer",
                            check(c["ok"]),
                        ]
                    )
            for r in block["runs"]:
                if r.get("method") == "lsdask" and r.get("kind") == "hdp" and "error" not in r:
                    rows.append(
                        [
                            f"K ({name})",
                            f"{r['label']}: final K, topics < 10 tokens, effective K",
                            f"{r['K_final']}, {r['K_small']}, {r['K_effective']}",
                            "< 10 tokens: 0",
                            check(r["K_small"] == 0),
                        ]
                    )
            for c in block.get("cost", []):
                if "error" in c:
                    continue
                rows.append(
                    [
                        f"Cost ({name})",
                        f"{c['label']}: laps without accepted moves / LDA lap at the same K "
                        f"(median of {c['no_move_laps']}; max)",
                        f"{fmt(c['no_move_ratio_median'], 2)}x; "
                        f"max {fmt(c['no_move_ratio_max'], 2)}x",
                        f"<= {cfg.cost_no_move_target}x",
                        check(c.get("no_move_ok")),
                    ]
                )
                rows.append(
                    [
                        f"Cost ({name})",
                        f"{c['label']}: laps 2-{len(c['laps']) + 1} in all / LDA laps at the same "
                        f"K; moves planned and judged in {c['moves_s']:.1f} s of "
                        f"{c['hdp_laps_s']:.0f} s",
                        f"{fmt(c['mean_ratio'], 2)}x",
                        f"<= {cfg.cost_mean_target}x",
                        check(c.get("mean_ok")),
                    ]
                )
    t = res.get("ttq")
    if t:
        lda = t["runs"][1]
        rows.append(
            [
                f"Time to quality ({t['corpus']} K={t['K']})",
                f"LDA alpha=auto to within {cfg.ttq_tol} of tomotopy's final "
                f"({fmt(t['runs'][0]['final_own'])}); budget {t['budget_s']:.0f} s",
                f"LDA {fmt_s(lda.get('time_to_quality_s'))} vs tomotopy "
                f"{fmt_s(t['runs'][0].get('time_to_quality_s'))} (HDP "
                f"{fmt_s(t['runs'][2].get('time_to_quality_s'))})",
                f"<= {cfg.ttq_time_target}x tomotopy",
                check(t.get("lda_ok")),
            ]
        )
    s = res.get("scale")
    if s and "ok" in s:
        rows.append(
            [
                "Scale",
                f"HDP({s['K']}), {s['laps']} laps, {s['docs'][0]:,} vs {s['docs'][1]:,} docs: "
                "peak RSS growth, worker / driver",
                f"{s['worker_growth']:.3f} / {s['driver_growth']:.3f}",
                f"<= {cfg.scale_rss_target}",
                check(s["ok"]),
            ]
        )
    return rows


def cost_lines(c: dict) -> list[str]:
    head = ["Lap", "K", "HDP s", "LDA s at K", "Ratio", "Ratio without moves", "Accepted"]
    head += ["Plan s", "Judge s"]
    rows = [
        [
            str(x["lap"]),
            str(x["K"]) + ("" if x["exact_K"] else " (interp.)"),
            f"{x['hdp_s']:.2f}",
            f"{x['lda_s']:.2f}",
            f"{x['ratio']:.2f}",
            f"{x['ratio_without_moves']:.2f}",
            str(x["accepted"]),
            f"{x['plan_s']:.2f}",
            f"{x['judge_s']:.2f}",
        ]
        for x in c["laps"]
    ]
    return [
        f"**{c['label']}**: first lap {c['first_lap_hdp_s']:.1f} s (memo fill, not compared); "
        f"LDA reference laps (steady median): "
        + ", ".join(f"K={k}: {v:.2f} s" for k, v in c["lda_ref"].items())
        + f"; median ratio without the moves' planning and judging "
        f"{fmt(c.get('ratio_without_moves_median'), 2)}x.",
        "",
        *table(head, rows),
        "",
    ]


def render(res: dict, cfg: Config) -> str:
    lines = header(res, f"HDP benchmark ({cfg.name})")
    if res.get("snapshot_commit"):
        lines.insert(-1, f"The lsdask measured is a frozen copy of git {res['snapshot_commit']}.")
    lines += [
        f"Parts: {', '.join(res['parts'])}. Heldout: {cfg.n_test} documents per corpus, "
        f"word types split 80/20 (seed {cfg.seed}); every method scored by "
        "`lsdask.evaluate.document_completion` with its OWN document-topic prior and with the "
        f"COMMON symmetric one (alpha = {ALPHA} in total, {ALPHA}/K per topic). lsdask: "
        f"sparsity 8, {cfg.n_workers}-worker LocalCluster, LDA's default start "
        f"(Gibbs sweeps: {cfg.gibbs_sweeps or 'default'}) on the clock.",
        "",
    ]
    lines += table(["Part", "What", "Measured", "Target", "Result"], target_rows(res, cfg))
    head = ["Run", "Own prior", "Common prior", "K", "Effective K", "Largest share"]
    head += ["Own prior total", "Seconds"]
    for corpus in res.get("corpora", []):
        for eta_key, block in corpus["by_eta"].items():
            lines += ["", f"## {corpus['corpus']}, eta = {eta_key}", ""]
            lines += table(head, quality_rows(block))
            lines += ["", "Settings:", ""]
            lines += [f"- {r['label']}: `{r.get('settings', '-')}`" for r in block["runs"]]
            for c in block.get("cost", []):
                if "error" not in c:
                    lines += ["", *cost_lines(c)]
            for r in block["runs"]:
                if r.get("kind") == "hdp" and r.get("method") == "lsdask" and r.get("moves"):
                    mv = "; ".join(
                        f"lap {k}: {v['deletes_accepted']}/{v['deletes_tried']} del, "
                        f"{v['merges_accepted']}/{v['merges_tried']} merge"
                        for k, v in r["moves"].items()
                    )
                    plans = "; ".join(
                        f"lap {p['lap']}: {p['deletes']} del cand., {p['pairs']} pairs"
                        for p in r.get("plans", [])
                    )
                    lines += ["", f"{r['label']} moves (accepted/judged): {mv}.",
                              f"Plans: {plans}. K trace: {r['K_trace']}."]  # fmt: skip
    t = res.get("ttq")
    if t:
        lines += ["", f"## Time to quality, {t['corpus']} K={t['K']}", ""]
        rows = []
        for r in t["runs"]:
            pts = ", ".join(f"{p['t']:.0f} s: {p['score_own']:.3f}" for p in r["points"])
            rows.append(
                [
                    r["label"],
                    f"{r['passes']:g}",
                    f"{r['stop']}" + (f" ({r['error']})" if r.get("error") else ""),
                    f"{r['train_s']:.0f}",
                    fmt_s(r.get("time_to_quality_s")),
                    fmt(r.get("final_own")),
                    fmt(r.get("final_common")),
                    pts or "-",
                ]
            )
        lines += table(
            ["Run", "Laps/sweeps", "Stopped by", "Train s", "Time to threshold", "Final own",
             "Final common", "Scored points (own prior)"],
            rows,
        )  # fmt: skip
    for block in res.get("laps", []):
        lines += ["", f"## Lap after lap: {block['corpus']}, K={block['K']}, eta={block['eta']}",
                  ""]  # fmt: skip
        lines += traces.render(block["runs"], "Heldout by wall time", block["reference_t"])
        lines += ["", *table(["What", "Measured", "Target", "Result"],
                             traces.laps_targets(block, cfg.laps_fall_tol))]  # fmt: skip
    s = res.get("scale")
    if s:
        lines += ["", "## Scale (fresh process per corpus)", ""]
        for name in ("small", "large"):
            r = s.get(name, {})
            if "failed" in r:
                lines.append(f"- {name}: FAILED {r['failed']}")
            elif r:
                lines.append(
                    f"- {name}: {r['n_docs']:,} docs, laps {[round(x, 1) for x in r['lap_s']]} s, "
                    f"K {r['K']} -> {r['K_final']}, worker peaks "
                    f"{[k // 1024 for k in r['worker_peak_kib']]} MiB, driver peak "
                    f"{r['driver_peak_kib'] // 1024} MiB"
                )
    lines += ["", step_times(res), "", f"Raw numbers: `{res['json_name']}`."]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------
def run(cfg: Config, parts: set[str], args: argparse.Namespace, bench: Run) -> None:
    res = bench.res
    res["parts"] = [p for p in PARTS if p in parts]
    import lsdask

    commit = Path(lsdask.__file__).parents[1] / "COMMIT"  # a frozen copy's (README.md)
    res["snapshot_commit"] = commit.read_text().strip() if commit.exists() else None
    res["corpora"] = []
    if parts & {"quality", "cost", "ttq", "laps"}:
        split = {"n_test": cfg.n_test, "seed": cfg.seed, "ap_docs_per_batch": cfg.ap_docs_per_batch}
        names = cfg.corpora if parts & {"quality", "cost", "ttq"} else ()
        datasets = bench.step(
            "data", lambda: corpora.load_corpora(names, args.corpora_dir, args.work_dir, **split)
        )
        res["data"] = {name: d.info for name, d in datasets.items()}
        lc, client = cluster.local_cluster(cfg.n_workers)
        try:
            client.run(warm_worker)
            warm_worker()  # the driver's kernels (Gibbs start, global step, moves)
            for data in datasets.values():
                if parts & {"quality", "cost"}:
                    quality_and_cost(cfg, data, client, parts, bench)
            if "ttq" in parts:
                data = datasets.get("20news") or next(iter(datasets.values()))
                t = bench.step("ttq", lambda: ttq_part(cfg, data, client, args.work_dir))
                res["ttq"] = {"corpus": data.name, **t}
            if "laps" in parts:
                res["laps"] = bench.step("laps", lambda: laps_blocks(cfg, args, split, client))
        finally:
            client.close()
            lc.close()
    if "scale" in parts:
        res["scale"] = bench.step(
            "scale", lambda: scale_part(cfg, args.quick, args.work_dir.parent / "bench_scale")
        )


def rerender(path: Path) -> int:
    """Recompute the quality targets and the cost part of a written result (a
    partial one too) from its raw numbers and write its report again (the
    measurements are not touched)."""
    import json

    from harness.report import to_json

    res = json.loads(path.read_text())
    fields = {f.name: f.type for f in dataclasses.fields(Config)}
    conf = {k: tuple(map(tuple, v)) if k in ("gensim_hdp", "tomotopy_hdp") else v
            for k, v in res["config"].items() if k in fields}  # fmt: skip
    conf = {k: tuple(v) if isinstance(v, list) else v for k, v in conf.items()}
    cfg = Config(**conf)
    for corpus in res.get("corpora", []):
        for block in corpus["by_eta"].values():
            summarize_quality(cfg, block)
            if "cost" in block:
                runs = block["runs"]
                hdps = [r for r in runs if r.get("method") == "lsdask" and r.get("kind") == "hdp"]
                block["cost"] = [cost_of(cfg, h, runs) for h in hdps if "error" not in h]
    res["rerendered"] = time.strftime("%Y-%m-%d %H:%M:%S")
    path.write_text(json.dumps(to_json(res), indent=1) + "\n")
    path.with_suffix(".md").write_text(render(res, cfg))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__, "small smoke run (a few minutes)")
    parser.add_argument(
        "--parts",
        default=None,
        help=f"comma-separated, of {','.join(PARTS)} (default: all with --quick, "
        "all but scale without)",
    )
    parser.add_argument("--corpora", default=None, help="20news,ap (default both)")
    parser.add_argument("--etas", default=None, help="quality part's etas: 0.1,0.01")
    parser.add_argument("--quality-k", type=int, default=None)
    parser.add_argument("--hdp-starts", default=None, help="e.g. 100,200")
    parser.add_argument("--hdp-laps", type=int, default=None)
    parser.add_argument("--lda-laps", type=int, default=None)
    parser.add_argument("--peer-budget", type=float, default=None, help="seconds per peer run")
    parser.add_argument("--ttq-k", type=int, default=None)
    parser.add_argument("--ttq-budget", type=float, default=None)
    parser.add_argument("--laps-corpora", default=None, help="laps part's corpora (imdb)")
    parser.add_argument("--laps-etas", default=None, help="laps part's etas: 0.1,0.01")
    parser.add_argument("--laps-k", type=int, default=None)
    parser.add_argument("--laps-sweeps", type=int, default=None, help="tomotopy's sweeps")
    parser.add_argument("--scale-factor", type=float, default=None)
    parser.add_argument("--scale-laps", type=int, default=None)
    parser.add_argument("--no-tomotopy-at-hdp-k", action="store_true")
    parser.add_argument("--tag", default=None, help="results/hdp[-quick]-TAG.{md,json}")
    parser.add_argument("--corpora-dir", type=Path, default=corpora.CORPORA_DIR)
    parser.add_argument("--work-dir", type=Path, default=corpora.WORK_DIR)
    parser.add_argument(
        "--rerender", type=Path, help="a result's JSON: recompute its targets, write its report"
    )
    parser.add_argument("--child-scale", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--k", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--laps", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--memo-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rerender:
        return rerender(args.rerender)
    if args.child_scale:
        scale_child(args)
        return 0
    cfg = QUICK if args.quick else FULL
    over: dict[str, Any] = {}
    if args.corpora:
        over["corpora"] = tuple(args.corpora.split(","))
    if args.etas:
        over["etas"] = tuple(float(x) for x in args.etas.split(","))
    if args.laps_corpora:
        over["laps_corpora"] = tuple(args.laps_corpora.split(","))
    if args.laps_etas:
        over["laps_etas"] = tuple(float(x) for x in args.laps_etas.split(","))
    if args.hdp_starts:
        over["hdp_starts"] = tuple(int(x) for x in args.hdp_starts.split(","))
    for opt, field in (
        ("quality_k", "K"), ("hdp_laps", "hdp_laps"), ("lda_laps", "lda_laps"),
        ("peer_budget", "peer_budget_s"), ("ttq_k", "ttq_K"), ("ttq_budget", "ttq_budget_s"),
        ("scale_factor", "scale_factor"), ("scale_laps", "scale_laps"), ("laps_k", "laps_K"),
        ("laps_sweeps", "laps_tomotopy_sweeps"),
    ):  # fmt: skip
        if getattr(args, opt) is not None:
            over[field] = getattr(args, opt)
    if args.no_tomotopy_at_hdp_k:
        over["tomotopy_at_hdp_k"] = False
    cfg = dataclasses.replace(cfg, **over)
    chosen = args.parts or (",".join(PARTS) if args.quick else "quality,cost,ttq")
    parts = {p.strip() for p in chosen.split(",") if p.strip()}
    if not parts <= set(PARTS):
        parser.error(f"--parts: unknown {sorted(parts - set(PARTS))}; choose from {PARTS}")
    stem = ("hdp-quick" if args.quick else "hdp") + (f"-{args.tag}" if args.tag else "")
    bench = Run(__file__, stem, args.out, argv, config=asdict(cfg))
    run(cfg, parts, args, bench)
    bench.finish(lambda res: render(res, cfg))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    sys.exit(main())
