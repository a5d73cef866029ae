"""Benchmark of L-sparse LDA against gensim, scikit-learn and tomotopy (lsparse Fig. 2-3, Sec. 5-6).

Everything is measured side by side in ONE run on the same machine, with the
same priors (alpha = 0.5 in total, i.e. alpha/K per topic; eta = 0.1) and the
same heldout documents, and every method's topics are scored by the same
procedure: lsdask's ``document_completion`` (lsparse App. E) on the method's
topic-word matrix.

Rows (see ``pipelines/benchmarks/README_lda.md``):

1. the local step on 1,000 20 Newsgroups documents, L=8 vs dense (L=0 in the
   kernel), restarts on, K=400 and K=800, median of 3 (paper Fig. 3b);
2. time to quality on AP and 20 Newsgroups, K in {100, 400}: lsdask memoized
   VI with L in {1, 4, 8, K} on a 2-worker LocalCluster, gensim ``LdaModel``,
   scikit-learn ``LatentDirichletAllocation`` (online) and tomotopy
   ``LDAModel``: heldout score after each pass against wall seconds of
   training (evaluation excluded), every run under a wall-clock budget;
3. heldout of L=8 vs dense (L=K) after the same laps; L=1 reported;
4. training tokens per second per core at K=400 on 20 Newsgroups, lsdask L=8
   vs gensim.

Usage::

    python pipelines/benchmarks/bench_lda.py --quick      # smoke run, < 3 min
    nohup python pipelines/benchmarks/bench_lda.py > data/bench_lda.log 2>&1 &   # ~60 min

Writes ``pipelines/benchmarks/results/lda{,-quick}.md`` and ``.json`` and one
PNG per corpus and K (``lda{,-quick}-<corpus>-K<K>.png``). Generated data (the
AP training corpus, topic snapshots) go to ``data/lda_bench/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from bench_machine import machine_info as describe_machine
from threadpoolctl import threadpool_info, threadpool_limits

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
ALPHA = 0.5  # total document-topic concentration (alpha / K per topic)
ETA = 0.1  # topic-word pseudo-count


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
    # started by LDA(init="kmeans++"), the default before, reported beside the rest
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


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------
def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def check(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        return f"{x:.{digits}f}"
    return str(x)


def fmt_s(x: float | None) -> str:
    if x is None:
        return "not reached"
    return f"{x:.1f} s" if x < 100 else f"{x:.0f} s"


def cpu_self() -> float:
    """CPU seconds (user + system) of this process, all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def worker_cpu(client: Any) -> float:
    """CPU seconds of all Dask worker processes together."""
    if client is None:
        return 0.0
    return float(sum(client.run(cpu_self).values()))


def method_label(method: str, L: str | None = None) -> str:
    return f"lsdask L={L}" if method == "lsdask" else method


def machine_info() -> dict[str, Any]:
    names = ("lsdask", "numpy", "scipy", "numba", "dask", "distributed", "pyarrow", "gensim")
    info = describe_machine(
        {
            **{m: m for m in names},
            "scikit-learn": "sklearn",
            "tomotopy": "tomotopy",
            "matplotlib": "matplotlib",
        }
    )
    info["threadpools"] = [
        {
            k: v
            for k, v in lib.items()
            if k
            in ("user_api", "internal_api", "version", "num_threads", "threading_layer", "filepath")
        }
        for lib in threadpool_info()
    ]
    return info


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------
@dataclass
class CorpusData:
    """A training corpus (Parquet, for lsdask) and its heldout documents."""

    name: str
    train_path: str
    X_train: sp.csr_matrix  # the same documents in memory, for the peers
    vocab_size: int
    n_batches: int
    A: sp.csr_matrix  # heldout documents, 80% of each one's word types
    B: sp.csr_matrix  # the other 20%
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_tokens(self) -> float:
        return float(self.X_train.sum())


def ensure_corpora(corpora_dir: Path) -> None:
    needed = ["ap", "20news", "20news-test"]
    if all((corpora_dir / c / "manifest.json").exists() for c in needed):
        return
    log(f"corpora missing under {corpora_dir}: running datasets/ingest_corpora.py")
    subprocess.run(
        [
            sys.executable,
            "datasets/ingest_corpora.py",
            "--shared",
            "../shared/data",
            "--out",
            str(corpora_dir),
        ],
        cwd=REPO,
        check=True,
    )


def prepare_corpus(cfg: Config, name: str, corpora_dir: Path, work_dir: Path) -> CorpusData:
    """AP: hold out a seeded choice of documents, write the rest as its own corpus.
    20 Newsgroups: train on ``20news``, hold out a seeded choice of ``20news-test``."""
    from lsdask.evaluate import split_documents
    from lsdask.io.corpus import Corpus, read_all

    rng = np.random.default_rng(cfg.seed)
    if name == "ap":
        src = Corpus.open(corpora_dir / "ap")
        X = read_all(src).tocsr().astype(np.float64)
        test = np.sort(rng.choice(X.shape[0], cfg.n_test, replace=False))
        train = np.setdiff1d(np.arange(X.shape[0]), test)
        X_train, X_test = X[train], X[test]
        out = work_dir / f"ap-train-{cfg.n_test}-seed{cfg.seed}"
        ok = False
        if (out / "manifest.json").exists():
            c = Corpus.open(out)
            ok = c.n_docs == X_train.shape[0] and c.docs_per_row_group == cfg.ap_docs_per_batch
        if not ok:
            Corpus.write(
                out,
                X_train,
                src.vocab,
                docs_per_row_group=cfg.ap_docs_per_batch,
                ingest_info={
                    "from": str(corpora_dir / "ap"),
                    "heldout_docs": test.tolist(),
                    "seed": cfg.seed,
                },
                overwrite=True,
            )
        train_path = str(out)
        X_train = read_all(out).tocsr().astype(np.float64)  # exactly what lsdask reads
    elif name == "20news":
        train_path = str(corpora_dir / "20news")
        X_train = read_all(train_path).tocsr().astype(np.float64)
        X_all = read_all(corpora_dir / "20news-test").tocsr().astype(np.float64)
        test = np.sort(rng.choice(X_all.shape[0], cfg.n_test, replace=False))
        X_test = X_all[test]
    else:
        raise ValueError(f"unknown corpus {name!r}")
    A, B = split_documents(X_test, 0.8, cfg.seed)
    corpus = Corpus.open(train_path)
    return CorpusData(
        name=name,
        train_path=train_path,
        X_train=X_train,
        vocab_size=X_train.shape[1],
        n_batches=len(corpus.batches),
        A=A,
        B=B,
        info={
            "train_path": train_path,
            "train_docs": int(X_train.shape[0]),
            "train_tokens": float(X_train.sum()),
            "vocab_size": int(X_train.shape[1]),
            "batches": len(corpus.batches),
            "docs_per_batch": corpus.docs_per_row_group,
            "test_docs": int(X_test.shape[0]),
            "test_tokens_A": float(A.sum()),
            "test_tokens_B": float(B.sum()),
            "test_ids_first": [int(i) for i in test[:10]],
        },
    )


# --------------------------------------------------------------------------
# the clock of one training run: budget, evaluation time excluded, snapshots
# --------------------------------------------------------------------------
class BudgetStop(Exception):
    """Raised inside a training loop when its budget is spent."""


class Recorder:
    """Wall clock of one training run (snapshot time excluded) and its topic snapshots.

    ``pass_end`` is called after every pass. The topics are saved (float32,
    to ``snap_dir``) on two levels:

    - *primary* snapshots, all scored: after each of the first
      ``first_passes`` passes (lsdask) or the first pass (peers), then
      whenever the clock grew by ``ratio`` and ``min_gap`` seconds since the
      last primary one, and always the last pass;
    - *fine* snapshots in between (clock grown by ``fine_ratio`` and
      ``fine_min_gap``), scored only where needed to pin down the time at
      which the run crossed the quality threshold (bisection, after all runs).
    """

    def __init__(
        self, cfg: Config, budget: float, snap_dir: Path, prefix: str, first_passes: int
    ) -> None:
        self.budget = budget
        self.hard_cap = cfg.hard_cap * budget
        self.ratio = cfg.snapshot_ratio
        self.min_gap = cfg.snapshot_min_gap_s
        self.fine_ratio = cfg.fine_ratio
        self.fine_min_gap = cfg.fine_min_gap_s
        self.snap_dir = snap_dir
        self.prefix = prefix
        self.first_passes = first_passes
        self.setup_s: float | None = None  # lsdask: clock at its first batch task
        self.points: list[dict[str, Any]] = []
        self.pass_ends: list[tuple[float, float]] = []
        self.excluded = 0.0
        self.passes = 0.0
        self.t0 = time.perf_counter()

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.excluded = 0.0

    def clock(self) -> float:
        return time.perf_counter() - self.t0 - self.excluded

    def over_budget(self) -> bool:
        return self.clock() >= self.budget

    def stop_mid_pass(self) -> bool:
        """Stop inside a pass: after the first pass once over budget, or past the hard cap."""
        c = self.clock()
        return (c >= self.budget and self.passes >= 1) or c >= self.hard_cap

    def pass_end(
        self, passes: float, topics: Callable[[], np.ndarray], force: bool = False
    ) -> None:
        t = self.clock()
        self.passes = passes
        self.pass_ends.append((float(passes), t))
        primary = [p["t"] for p in self.points if p["primary"]]
        last = primary[-1] if primary else None
        due = last is None or (t >= last * self.ratio and t - last >= self.min_gap)
        if force or passes <= self.first_passes or due or t >= self.budget:
            self.snapshot(passes, t, topics, primary=True)
            return
        last = self.points[-1]["t"]
        if t >= last * self.fine_ratio and t - last >= self.fine_min_gap:
            self.snapshot(passes, t, topics, primary=False)

    def snapshot(
        self, passes: float, t: float, topics: Callable[[], np.ndarray], primary: bool = True
    ) -> None:
        s = time.perf_counter()
        path = self.snap_dir / f"{self.prefix}-{len(self.points):03d}.npy"
        np.save(path, np.asarray(topics(), dtype=np.float32))
        self.points.append(
            {"pass": float(passes), "t": float(t), "path": str(path), "primary": primary}
        )
        self.excluded += time.perf_counter() - s

    def last_snapshot_pass(self) -> float | None:
        return self.points[-1]["pass"] if self.points else None

    def pass_seconds(self) -> list[float]:
        """Seconds of each whole pass (the first includes the setup inside the clock)."""
        ends = [(p, t) for p, t in self.pass_ends if float(p).is_integer()]
        times = [t for _, t in ends]
        return list(np.diff([0.0, *times]))


def steady_pass(seconds: list[float], setup: float | None = None) -> float | None:
    """Median pass time, leaving out the first pass when there are more; a lone
    first pass counts without the ``setup`` seconds inside it."""
    if not seconds:
        return None
    if len(seconds) == 1:
        return seconds[0] - (setup or 0.0)
    return float(np.median(seconds[1:]))


# --------------------------------------------------------------------------
# lsdask
# --------------------------------------------------------------------------
def _make_lsdask_classes() -> tuple[type, type]:
    """An executor that stops a run at its budget and an LDA that reports every lap."""
    from lsdask import LDA
    from lsdask.engine.dask_executor import DaskExecutor

    class BudgetExecutor(DaskExecutor):
        """The shared client, plus: stop before a wave once the budget is spent, and
        keep a reference to the newest statistics of every batch (the memo), so that a
        run stopped mid-lap can be scored at its current globals."""

        def __init__(self, client: Any, rec: Recorder, n_batches: int) -> None:
            super().__init__(client)
            self.rec = rec
            self.n_batches = n_batches
            self.index: dict[int, int] = {}
            self.memo: dict[int, Any] = {}
            self.in_flight: dict[int, list] = {}
            self.model: Any = None
            self.batches_in_lap = 0
            self.stopped_at_lap_end = False

        def register(self, batches: Any) -> list:
            handles = super().register(batches)
            self.index = {id(h): i for i, h in enumerate(handles)}
            return handles

        # memoized VI submits a wave (``submit``), and while the workers run it
        # the driver finishes the previous one; ``map`` = collect(submit(...))
        def submit(self, fn: Any, handles: Any, shared: Any) -> Any:
            if self.rec.stop_mid_pass():
                raise BudgetStop()
            if self.rec.setup_s is None:
                self.rec.setup_s = self.rec.clock()
            self.model = getattr(fn, "model", None)
            pending = super().submit(fn, handles, shared)
            self.in_flight[id(pending)] = list(handles)
            return pending

        def collect(self, pending: Any) -> list:
            out = super().collect(pending)
            handles = self.in_flight.pop(id(pending), [])
            for h, stats in zip(handles, out, strict=True):
                self.memo[self.index.get(id(h), id(h))] = stats
            self.batches_in_lap += len(out)
            return out

        def current_topics(self) -> np.ndarray:
            """E[phi] at the globals of the memo (valid from lap 2 on)."""
            stats = list(self.memo.values())
            total = stats[0]
            for st in stats[1:]:
                total = total + st
            return self.model.global_step(total).topics

    class TracedLDA(LDA):
        """``lsdask.LDA`` whose memoized-VI learner calls ``bench_callback`` after every lap."""

        bench_callback: Any = None

        def _learner(self, model: Any, n_rows: int, init_stats: Any) -> Any:
            learner = super()._learner(model, n_rows, init_stats)
            callback = self.bench_callback
            if callback is None:
                return learner

            class WithCallback:
                def run(self, *args: Any, **kwargs: Any) -> Any:
                    kwargs.setdefault("callback", callback)
                    return learner.run(*args, **kwargs)

            return WithCallback()

    return BudgetExecutor, TracedLDA


def train_lsdask(cfg: Config, data: CorpusData, K: int, L: str, client: Any, rec: Recorder) -> dict:
    BudgetExecutor, TracedLDA = _make_lsdask_classes()
    L_number, _, start = L.partition("+")
    sparsity = K if L_number == "K" else int(L_number)
    init = {"init": start} if start else {}
    executor = BudgetExecutor(client, rec, data.n_batches)
    est = TracedLDA(
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
        glob = last["glob"] = result.globals
        stop = rec.over_budget()
        rec.pass_end(int(result.n_laps), lambda: glob.topics, force=stop)
        executor.batches_in_lap = 0
        if stop:
            executor.stopped_at_lap_end = True
            raise BudgetStop()

    rec.start()
    try:
        if "callback" in inspect.signature(est.fit).parameters:  # public per-lap hook
            est.fit(data.train_path, callback=on_lap)
        else:  # older lsdask: the learner's callback through _learner
            est.bench_callback = on_lap
            est.fit(data.train_path)
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


# --------------------------------------------------------------------------
# peers
# --------------------------------------------------------------------------
def train_gensim(cfg: Config, data: CorpusData, K: int, rec: Recorder) -> dict:
    from gensim.models import LdaModel
    from gensim.models.callbacks import Metric

    X = data.X_train
    bow = [
        list(
            zip(
                X.indices[X.indptr[d] : X.indptr[d + 1]].tolist(),
                X.data[X.indptr[d] : X.indptr[d + 1]].tolist(),
                strict=True,
            )
        )
        for d in range(X.shape[0])
    ]
    chunk = cfg.gensim_chunksize

    class BudgetCorpus:
        """The corpus; stops the run at a chunk boundary once the budget is spent."""

        def __len__(self) -> int:
            return len(bow)

        def __iter__(self):
            for i, doc in enumerate(bow):
                if i % chunk == 0 and i > 0 and rec.stop_mid_pass():
                    state["mid_pass_docs"] = i
                    raise BudgetStop()
                yield doc

    state: dict[str, Any] = {"passes": 0, "model": None}

    class PassHook(Metric):
        """Called by gensim at the end of every pass (after its last M-step)."""

        def __init__(self) -> None:
            self.logger = None
            self.title = "bench-pass"
            self.viz_env = None

        def get_value(self, **kwargs: Any) -> float:
            state["passes"] += 1
            model = state["model"]
            stop = rec.over_budget() or state["passes"] >= cfg.max_passes
            rec.pass_end(state["passes"], model.get_topics, force=stop)
            if rec.over_budget():
                raise BudgetStop()
            return 0.0

    rec.start()
    model = LdaModel(
        num_topics=K,
        id2word={i: str(i) for i in range(data.vocab_size)},
        alpha=ALPHA / K,
        eta=ETA,
        chunksize=chunk,
        update_every=1,
        eval_every=None,
        random_state=cfg.seed,
        callbacks=[PassHook()],
    )
    state["model"] = model
    reason = "max passes"
    try:
        model.update(BudgetCorpus(), passes=cfg.max_passes)
    except BudgetStop:
        reason = "budget"
        if "mid_pass_docs" in state:
            frac = state["passes"] + state["mid_pass_docs"] / len(bow)
            rec.pass_end(frac, model.get_topics, force=True)
    blas = [lib.get("num_threads") for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return {
        "stop": reason,
        "cores": 1,
        "cores_note": f"1 process + BLAS ({blas[0] if blas else '?'} threads)",
        "dtype": str(np.dtype(model.dtype)),
    }


def train_sklearn(cfg: Config, data: CorpusData, K: int, rec: Recorder) -> dict:
    from sklearn.decomposition import LatentDirichletAllocation

    X = data.X_train
    D = X.shape[0]
    bs = cfg.sklearn_batch
    rec.start()
    lda = LatentDirichletAllocation(
        n_components=K,
        doc_topic_prior=ALPHA / K,
        topic_word_prior=ETA,
        learning_method="online",
        batch_size=bs,
        total_samples=D,
        n_jobs=1,
        random_state=cfg.seed,
    )

    def topics() -> np.ndarray:
        c = lda.components_
        return c / c.sum(axis=1, keepdims=True)

    reason = "max passes"
    for p in range(1, cfg.max_passes + 1):
        stopped_at = None
        for s in range(0, D, bs):
            if s > 0 and rec.stop_mid_pass():
                stopped_at = s
                break
            lda.partial_fit(X[s : s + bs])
        if stopped_at is not None:
            reason = "budget"
            rec.pass_end(p - 1 + stopped_at / D, topics, force=True)
            break
        stop = rec.over_budget()
        rec.pass_end(p, topics, force=stop or p == cfg.max_passes)
        if stop:
            reason = "budget"
            break
    return {"stop": reason, "cores": 1, "cores_note": "n_jobs=1 (+BLAS)"}


def tomotopy_lda(X: sp.csr_matrix, K: int, seed: int) -> Any:
    """tomotopy's LDAModel with the benchmark's priors holding the documents of X
    (word ids as strings, each repeated by its count)."""
    import tomotopy as tp

    mdl = tp.LDAModel(k=K, alpha=ALPHA / K, eta=ETA, seed=seed)
    mdl.optim_interval = (
        0  # keep alpha fixed (tomotopy optimizes it every 10 iterations by default)
    )
    for d in range(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        pairs = zip(X.indices[lo:hi], X.data[lo:hi], strict=True)
        words = [str(w) for w, c in pairs for _ in range(int(c))]
        if words:
            mdl.add_doc(words)
    return mdl


def tomotopy_pseudo_counts(mdl: Any, K: int, V: int, cache: dict[str, Any]) -> np.ndarray:
    """(K, V) topic-word counts + eta of a tomotopy model over the whole vocabulary
    (eta for words it never saw); ``cache`` keeps its word ids between calls."""
    if "ids" not in cache:
        cache["ids"] = np.array([int(w) for w in mdl.vocabs], dtype=np.int64)
    ids = cache["ids"]
    lam = np.full((K, V), ETA)
    for k in range(K):
        lam[k, ids] = np.asarray(mdl.get_topic_word_dist(k, normalize=False), dtype=np.float64)
    return lam


def train_tomotopy(cfg: Config, data: CorpusData, K: int, rec: Recorder) -> dict:
    mdl = tomotopy_lda(data.X_train, K, cfg.seed)
    V = data.vocab_size
    cache: dict[str, Any] = {}

    def topics() -> np.ndarray:
        lam = tomotopy_pseudo_counts(mdl, K, V, cache)
        return lam / lam.sum(axis=1, keepdims=True)  # E[phi] over the whole vocabulary

    reason = "max passes"
    rec.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "training result may differ ... workers != 1"
        for p in range(1, cfg.max_passes + 1):
            mdl.train(1, workers=cfg.tomotopy_workers)
            stop = rec.over_budget()
            rec.pass_end(p, topics, force=stop or p == cfg.max_passes)
            if stop:
                reason = "budget"
                break
    return {
        "stop": reason,
        "cores": cfg.tomotopy_workers,
        "cores_note": f"workers={cfg.tomotopy_workers} threads (collapsed Gibbs sampling)",
    }


# --------------------------------------------------------------------------
# row 2: one (corpus, K) configuration
# --------------------------------------------------------------------------
def _eval_snapshot(path: str, A: Any, B: Any, alpha: float) -> tuple[float, float]:
    """Heldout score of one topic snapshot (runs inside a Dask worker)."""
    from lsdask.evaluate import document_completion

    t = time.perf_counter()
    topics = np.load(path).astype(np.float64)
    topics /= topics.sum(axis=1, keepdims=True)
    score = document_completion(A, B, topics, alpha)
    return float(score), time.perf_counter() - t


def _warm_worker() -> bool:
    """Load (or compile) lsdask's numba kernels in a worker: local step and scoring."""
    from lsdask.evaluate import document_completion
    from lsdask.models.lda import LDAModel

    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, size=(6, 30)).astype(np.float64))
    model = LDAModel(4, 30, ALPHA, ETA)
    lam = ETA + rng.random((4, 30))
    from lsdask.models.dirichlet_logs import DirichletPosterior

    glob = DirichletPosterior.from_lam(lam, ETA)
    model.local_step(X, glob, 2)
    model.local_step(X, glob, None)
    document_completion(X, X, glob.topics, ALPHA)
    return True


def _warm_driver() -> None:
    """Load lsdask's numba kernels in this process too (the Gibbs start, the
    global step, the ELBO run here): otherwise the first timed lsdask run pays
    for loading them (about 5 s at AP K=100 in the run of git 6728ac4)."""
    from lsdask import LDA

    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, size=(40, 30)).astype(np.float64))
    LDA(4, sparsity=2, n_laps=2, gibbs_sweeps=2, client="sync", progress=False).fit(X)


def methods_for(cfg: Config) -> list[tuple[str, str | None]]:
    """Run order: lsdask runs interleaved with the peers, dense last."""
    ls = [("lsdask", L) for L in cfg.sparsities if L != "K"]
    peers = [("gensim", None), ("sklearn", None), ("tomotopy", None)]
    order: list[tuple[str, str | None]] = []
    for i in range(max(len(ls), len(peers))):
        if i < len(ls):
            order.append(ls[i])
        if i < len(peers):
            order.append(peers[i])
    if "K" in cfg.sparsities:
        order.append(("lsdask", "K"))
    return order


def run_config(
    cfg: Config, data: CorpusData, K: int, client: Any, AB: tuple, snap_root: Path
) -> dict:
    budget = cfg.budget(data.name, K)
    snap_dir = snap_root / f"{data.name}-K{K}"
    shutil.rmtree(snap_dir, ignore_errors=True)
    snap_dir.mkdir(parents=True)
    runs: list[dict[str, Any]] = []
    for method, L in methods_for(cfg):
        label = method_label(method, L)
        prefix = label.replace(" ", "_").replace("=", "")
        rec = Recorder(
            cfg,
            budget,
            snap_dir,
            prefix,
            first_passes=cfg.snapshot_first_passes if L in ("8", "K") else 1,
        )
        log(f"  {data.name} K={K}: {label} (budget {budget:.0f} s)")
        cpu0, wcpu0, wall0 = cpu_self(), worker_cpu(client), time.perf_counter()
        try:
            if method == "lsdask":
                info = train_lsdask(cfg, data, K, L, client, rec)
            elif method == "gensim":
                info = train_gensim(cfg, data, K, rec)
            elif method == "sklearn":
                info = train_sklearn(cfg, data, K, rec)
            else:
                info = train_tomotopy(cfg, data, K, rec)
            error = None
        except Exception as exc:  # keep the other runs going; report it
            info = {"stop": "error", "cores": None, "cores_note": ""}
            error = f"{type(exc).__name__}: {exc}"
            log(f"    ERROR {error}\n{traceback.format_exc()}")
        wall = time.perf_counter() - wall0
        train_wall = rec.clock()
        cpu = (cpu_self() - cpu0) + (worker_cpu(client) - wcpu0)
        run = {
            "method": method,
            "L": L,
            "label": label,
            "budget_s": budget,
            "train_s": train_wall,
            "wall_s_incl_snapshots": wall,
            "snapshot_s": rec.excluded,
            "cpu_s": cpu,
            "measured_cores": cpu / wall if wall > 0 else None,
            "passes": rec.passes,
            "setup_s": rec.setup_s,
            "pass_ends": rec.pass_ends,
            "pass_s": rec.pass_seconds(),
            "points": rec.points,
            "error": error,
            **info,
        }
        runs.append(run)
        log(
            f"    {rec.passes:g} passes in {train_wall:.1f} s, stop: {info['stop']}, "
            f"{len(rec.points)} snapshots, {run['measured_cores'] or 0:.2f} cores measured"
        )
    # score the primary snapshots on the workers (2 at a time; nothing else runs now),
    # then bisect with the fine ones where each run crossed the quality threshold
    t0 = time.perf_counter()
    A_f, B_f = AB
    n_scored = 0

    def score(keys: list[tuple[int, int]]) -> None:
        futs = {
            key: client.submit(
                _eval_snapshot,
                runs[key[0]]["points"][key[1]]["path"],
                A_f,
                B_f,
                ALPHA,
                pure=False,
            )
            for key in keys
        }
        for (i, j), fut in futs.items():
            sc, secs = fut.result()
            runs[i]["points"][j]["score"] = sc
            runs[i]["points"][j]["eval_s"] = secs

    primary = [
        (i, j) for i, r in enumerate(runs) for j, p in enumerate(r["points"]) if p["primary"]
    ]
    score(primary)
    n_scored += len(primary)
    for round_ in range(cfg.bisect_rounds):
        keys = bisection_keys(cfg, runs)
        if not keys or (round_ >= 2 and time.perf_counter() - t0 > cfg.max_scoring_s):
            break
        score(keys)
        n_scored += len(keys)
    eval_wall = time.perf_counter() - t0
    n_saved = sum(len(r["points"]) for r in runs)
    log(f"  scored {n_scored} of {n_saved} snapshots in {eval_wall:.0f} s")
    shutil.rmtree(snap_dir, ignore_errors=True)
    for run in runs:
        run["points_unscored"] = [
            {k: v for k, v in p.items() if k != "path"} for p in run["points"] if "score" not in p
        ]
        run["points"] = [
            {k: v for k, v in p.items() if k != "path"} for p in run["points"] if "score" in p
        ]
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


def bisection_keys(cfg: Config, runs: list[dict]) -> list[tuple[int, int]]:
    """For each run, the unscored snapshot halfway between its last scored point
    below the threshold and its first scored point above it (if any)."""
    scored = [p["score"] for r in runs for p in r["points"] if "score" in p]
    if not scored:
        return []
    thr = max(scored) - cfg.quality_tol
    keys = []
    for i, r in enumerate(runs):
        pts = r["points"]
        hit = next((j for j, p in enumerate(pts) if p.get("score", -np.inf) >= thr), None)
        if hit is None:
            continue
        below = max((j for j in range(hit) if "score" in pts[j]), default=-1)
        between = [j for j in range(below + 1, hit) if "score" not in pts[j]]
        if between:
            keys.append((i, between[len(between) // 2]))
    return keys


def summarize_config(cfg: Config, res: dict, data: CorpusData) -> None:
    runs = res["runs"]
    scored = [(p["score"], r["label"]) for r in runs for p in r["points"] if "score" in p]
    if not scored:
        res["best"] = None
        return
    best, best_by = max(scored)
    thr = best - cfg.quality_tol
    res["best"], res["best_by"], res["threshold"] = best, best_by, thr
    for r in runs:
        pts = [p for p in r["points"] if "score" in p]
        r["final_score"] = pts[-1]["score"] if pts else None
        r["best_score"] = max(p["score"] for p in pts) if pts else None
        hit = next((p for p in pts if p["score"] >= thr), None)
        r["time_to_quality_s"] = hit["t"] if hit else None
        r["pass_at_quality"] = hit["pass"] if hit else None
        steady = steady_pass(r["pass_s"], r.get("setup_s"))
        r["steady_pass_s"] = steady
        r["tokens_per_pass"] = data.n_tokens
        if steady and r.get("cores"):
            r["tokens_per_s"] = data.n_tokens / steady
            r["tokens_per_s_per_core"] = data.n_tokens / steady / r["cores"]
        else:
            r["tokens_per_s"] = r["tokens_per_s_per_core"] = None
    by = {r["label"]: r for r in runs}
    l8 = by.get("lsdask L=8")
    peers = [r for r in runs if r["method"] != "lsdask"]
    others = [r for r in runs if r["label"] != "lsdask L=8"]
    if l8 is not None:
        t8 = l8["time_to_quality_s"]
        inf = float("inf")

        def t(r: dict) -> float:
            return inf if r["time_to_quality_s"] is None else r["time_to_quality_s"]

        res["l8_first_all"] = t8 is not None and all(t8 <= t(r) for r in others)
        res["l8_first_peers"] = t8 is not None and all(t8 <= t(r) for r in peers)
        fastest = min(others, key=t) if others else None
        res["fastest_other"] = (fastest["label"], fastest["time_to_quality_s"]) if fastest else None
        finals = [r["final_score"] for r in peers if r["final_score"] is not None]
        res["best_peer_final"] = max(finals) if finals else None
        res["l8_final_ge_peers"] = l8["final_score"] is not None and all(
            l8["final_score"] >= f for f in finals
        )
    # row 3: L=8 vs dense (L=K) after the same laps
    res["row3"] = same_laps(cfg, by)


def same_laps(cfg: Config, by: dict[str, dict]) -> dict | None:
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
            s = laps(r)
            out[f"L{L}"] = s.get(n)
            out[f"L{L}_final"] = r.get("final_score")
    return out


def run_corpus(
    cfg: Config,
    data: CorpusData,
    snap_root: Path,
    res: dict,
    before: Callable[[Any], None] | None = None,
) -> None:
    from distributed import Client, LocalCluster

    log(f"{data.name}: starting a {cfg.n_workers}-worker LocalCluster")
    cluster = LocalCluster(
        n_workers=cfg.n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = Client(cluster)
    try:
        client.run(_warm_worker)
        _warm_driver()
        AB = (
            client.scatter(data.A, broadcast=True, hash=False),
            client.scatter(data.B, broadcast=True, hash=False),
        )
        if before is not None:
            before(client)
        for K in cfg.Ks:
            t0 = time.perf_counter()
            out = run_config(cfg, data, K, client, AB, snap_root)
            res["configs"].append(out)
            res["step_wall_s"][f"row 2 {data.name} K={K}"] = time.perf_counter() - t0
            write_partial(res)
    finally:
        client.close()
        cluster.close()


# --------------------------------------------------------------------------
# row 1: the local step, L=8 vs dense, and the profile of the sparse step
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
    counters: dict[str, Any] = {}

    def call(sparsity: int | None, m: Any = model) -> Callable[[], None]:
        def fn() -> None:
            _, doc_topic, stats = m.doc_topic_step(X, glob, sparsity)
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
    samples: dict[str, list[float]] = {"sparse": [], "dense": []}
    with threadpool_limits(1):
        for _ in range(cfg.r1_repeats):
            for name, sparsity in (("sparse", L), ("dense", None)):
                t0 = time.perf_counter()
                call(sparsity)()
                samples[name].append(time.perf_counter() - t0)
    sparse_s, dense_s = (float(np.median(samples[k])) for k in ("sparse", "dense"))
    out.update(
        {
            "samples_s": samples,
            "sparse_s": sparse_s,
            "dense_s": dense_s,
            "speedup": dense_s / sparse_s,
            "sparse_docs_per_s": X.shape[0] / sparse_s,
            "dense_docs_per_s": X.shape[0] / dense_s,
            "counters": {"sparse": counters.get(L), "dense": counters.get(None)},
        }
    )
    return out


def _replica_factory() -> Callable:
    """A numba copy of lsdask's L-sparse per-document iterations (no restarts) that
    can run one part twice: the extra cost of the duplicate is that part's cost."""
    import numba

    from lsdask.kernels.special import digamma
    from lsdask.kernels.topl import _select

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


def profile_sparse_step(cfg: Config, est: Any, X: sp.csr_matrix, repeats: int) -> dict[str, Any]:
    """Where the L-sparse local step spends its time (K of ``est``, L=8).

    - restarts: the model's local step with restarts on vs off;
    - selection / exp / digamma / O(K) work per iteration: a numba copy of the
      main iterations that runs one part twice; the extra time is that part.
    """
    from lsdask.models.lda import LDAModel

    model, glob = est.model_, est.posterior_
    K, L = model.n_components, cfg.r1_L
    no_restarts = dataclasses.replace(
        model, options=dataclasses.replace(model.options, restarts=False)
    )
    assert isinstance(no_restarts, LDAModel)
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
        replica = _replica_factory()
        replica(*args, 0)
    except Exception as exc:  # the library's primitives changed
        replica = None
        out["replica_error"] = f"{type(exc).__name__}: {exc}"
    fns: dict[str, Callable[[], Any]] = {
        "library (restarts on)": lib(model),
        "library (restarts off)": lib(no_restarts),
    }
    if replica is not None:
        for name, dup in (
            ("replica", 0),
            ("replica + 2x selection", 1),
            ("replica + 2x exp", 2),
            ("replica + 2x digamma", 3),
            ("replica + 2x O(K) per iteration", 4),
        ):
            fns[name] = lambda d=dup: replica(*args, d)
    for fn in fns.values():
        fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    results: dict[str, Any] = {}
    with threadpool_limits(1):
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                r = fn()
                samples[name].append(time.perf_counter() - t0)
                results[name] = r
    med = {k: float(np.min(v)) for k, v in samples.items()}  # min: least disturbed by other jobs
    out["samples_s"] = samples
    out["median_s"] = med
    full = med["library (restarts on)"]
    parts = {"restarts": full - med["library (restarts off)"]}
    if replica is not None:
        base = med["replica"]
        parts["selection"] = med["replica + 2x selection"] - base
        parts["exp"] = med["replica + 2x exp"] - base
        parts["digamma"] = med["replica + 2x digamma"] - base
        parts["O(K) zeroing + copy per iteration"] = med["replica + 2x O(K) per iteration"] - base
        parts["rest of the iterations (loops, gathers, init, entropy, summary)"] = (
            med["library (restarts off)"]
            - parts["selection"]
            - parts["exp"]
            - parts["digamma"]
            - parts["O(K) zeroing + copy per iteration"]
        )
        _, its, n_sel, sel_elems, n_exp, n_dig = results["replica"]
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


def exp_underflow_microbench() -> dict[str, float]:
    """ns per math.exp for ordinary and for underflowing arguments (exp(P - max P)
    over the topics, P = psi(N + alpha/K), is mostly around psi(alpha/K) ~ -K/alpha)."""
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
        best = min(_timeit(lambda x=x: expsum(x)) for _ in range(3))
        out[name] = best / n * 1e9
    return out


def _timeit(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def lap_anatomy(cfg: Config, est: Any, client: Any, corpus_path: str, L: int) -> dict[str, Any]:
    """Pieces of one memoized-VI update at this K: a batch task on a worker, the
    driver's global step, ELBO and memo arithmetic, the broadcast of the globals."""
    from distributed import wait

    from lsdask.io.sources import corpus_source
    from lsdask.learn.tasks import LocalStepTask

    model, glob, stats = est.model_, est.posterior_, est.stats_
    source, _ = corpus_source(corpus_path)
    batch = source.batches[0]
    task = LocalStepTask(model, L)
    out: dict[str, Any] = {
        "K": model.n_components,
        "L": L,
        "batches": len(source.batches),
        "batches_per_update": cfg.n_workers,
    }
    t0 = time.perf_counter()
    with threadpool_limits(1):
        fresh = task(batch, glob)
    out["task_in_driver_s"] = time.perf_counter() - t0
    out["global_step_s"] = min(_timeit(lambda: model.global_step(stats)) for _ in range(2))
    out["elbo_s"] = min(_timeit(lambda: model.elbo(stats, glob)) for _ in range(2))
    # what memoized VI does per visited batch: the in-place total - old + new
    running = stats.dense_copy()
    out["memo_update_s"] = min(_timeit(lambda: running.replace_(fresh, fresh)) for _ in range(2))
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
    waves = math.ceil(len(source.batches) / cfg.n_workers)
    driver = (
        out["global_step_s"]
        + out["elbo_s"]
        + cfg.n_workers * out["memo_update_s"]
        + out["broadcast_s"]
    )
    out["driver_per_update_s"] = driver
    out["predicted_lap_s"] = waves * (out["task_roundtrip_s"] + driver)
    out["predicted_driver_share"] = waves * driver / out["predicted_lap_s"]
    return out


def run_row1(cfg: Config, client: Any, data: CorpusData, res: dict) -> None:
    """Row 1 (and the profiles) on the first 1,000 documents of 20 Newsgroups."""
    from lsdask.io.corpus import Corpus

    corpus = Corpus.open(data.train_path)
    X = corpus.batches[0].load().to_csr(corpus.vocab_size).astype(np.float64)[: cfg.r1_docs]
    X = sp.csr_matrix(X)
    row1: dict[str, Any] = {"docs": X.shape[0], "tokens": float(X.sum()), "by_K": {}}
    for K in cfg.r1_Ks:
        t0 = time.perf_counter()
        log(f"row 1: short lsdask fit at K={K} ({cfg.r1_fit_laps} laps, L=8)")
        est = short_fit(cfg, K, client, data.train_path, X)
        fit_s = time.perf_counter() - t0
        log(f"row 1: local step L={cfg.r1_L} vs dense, K={K}, {X.shape[0]} documents")
        r = row1_local_step(cfg, est, X)
        r["fit_s"] = fit_s
        log(f"  sparse {r['sparse_s']:.2f} s, dense {r['dense_s']:.2f} s: {r['speedup']:.1f}x")
        try:
            r["profile"] = profile_sparse_step(cfg, est, X, cfg.r1_repeats)
        except Exception as exc:
            r["profile"] = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"  profile failed: {exc}\n{traceback.format_exc()}")
        if K == cfg.r1_Ks[0]:
            try:
                r["lap_anatomy"] = lap_anatomy(cfg, est, client, data.train_path, cfg.r1_L)
            except Exception as exc:
                r["lap_anatomy"] = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"  lap anatomy failed: {exc}\n{traceback.format_exc()}")
        row1["by_K"][str(K)] = r
        res["step_wall_s"][f"row 1 K={K}"] = time.perf_counter() - t0
        del est
    row1["exp_ns"] = exp_underflow_microbench()
    res["row1"] = row1
    write_partial(res)


# --------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------
STYLE = {
    "lsdask L=1": ("tab:red", "v"),
    "lsdask L=4": ("tab:orange", "s"),
    "lsdask L=8": ("tab:blue", "o"),
    "lsdask L=K": ("black", "D"),
    "lsdask L=8+kmeans++": ("tab:cyan", "P"),
    "gensim": ("tab:green", "^"),
    "sklearn": ("tab:purple", "x"),
    "tomotopy": ("tab:brown", "+"),
}


def plot_config(conf: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for r in conf["runs"]:
        pts = [p for p in r["points"] if "score" in p]
        if not pts:
            continue
        color, marker = STYLE.get(r["label"], (None, "."))
        ax.plot(
            [max(p["t"], 1e-2) for p in pts],
            [p["score"] for p in pts],
            marker=marker,
            color=color,
            label=r["label"],
            ms=4,
            lw=1.2,
        )
    if conf.get("threshold") is not None:
        ax.axhline(
            conf["threshold"],
            color="gray",
            ls="--",
            lw=0.8,
            label=f"best - {conf['best'] - conf['threshold']:.2f}",
        )
    ax.set_xscale("log")
    ax.set_xlabel("training wall seconds (scoring excluded)")
    ax.set_ylabel("heldout log-lik. per token (doc. completion)")
    ax.set_title(f"{conf['corpus']}, K={conf['K']}")
    scores = [p["score"] for r in conf["runs"] for p in r["points"] if "score" in p]
    if scores and conf.get("best") is not None:
        lo = max(min(scores), conf["best"] - 1.0)
        ax.set_ylim(lo - 0.02, conf["best"] + 0.05)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------
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
        by = {r["label"]: r for r in conf["runs"]}
        l8 = by.get("lsdask L=8")
        fo = conf.get("fastest_other")
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
                check(conf.get("l8_first_all"))
                + (
                    ""
                    if conf.get("l8_first_all")
                    else f" (vs peers only: {check(conf.get('l8_first_peers'))})"
                ),
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
        l1 = r3.get("L1")
        rows.append(
            [
                f"3 ({name})",
                f"Heldout after {r3['lap']} lap(s): L=8 vs dense (L=K); L=1 reported",
                f"L=8 {r3['L8']:.3f}, dense {r3['LK']:.3f} (diff {r3['diff']:+.3f}); "
                f"L=1 {fmt(l1)} (final {fmt(r3.get('L1_final'))})",
                f"L=8 >= dense - {cfg.same_laps_tol}",
                check(r3["ok"]),
            ]
        )
    r4 = res.get("row4")
    if r4:
        rows.append(
            [
                f"4 (20news K={r4['K']})",
                "Training tokens/s per core: lsdask L=8 (2 worker processes) vs gensim (1 process)",
                f"{r4['ratio']:.2f}x ({r4['lsdask']:,.0f} vs {r4['gensim']:,.0f} tokens/s/core; "
                f"by measured CPU: {fmt(r4.get('ratio_measured'), 2)}x)"
                if r4.get("ratio") is not None
                else "-",
                f">= {cfg.r4_target:g}x",
                check(r4["ratio"] >= cfg.r4_target) if r4.get("ratio") is not None else "n/a",
            ]
        )
    return rows


def row4(cfg: Config, res: dict) -> dict | None:
    confs = [c for c in res.get("configs", []) if c["corpus"] == "20news"]
    if not confs:
        return None
    conf = max(confs, key=lambda c: c["K"])
    by = {r["label"]: r for r in conf["runs"]}
    l8, gs = by.get("lsdask L=8"), by.get("gensim")
    out: dict[str, Any] = {"K": conf["K"]}
    if (
        not l8
        or not gs
        or not l8.get("tokens_per_s_per_core")
        or not gs.get("tokens_per_s_per_core")
    ):
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


def gibbs_sweeps(cfg: Config) -> int:
    """The sweeps of the Gibbs start of lsdask's runs."""
    from lsdask import config

    return config.GIBBS_SWEEPS if cfg.gibbs_sweeps is None else cfg.gibbs_sweeps


def render_markdown(res: dict, cfg: Config) -> str:
    m = res["machine"]
    lines = [
        f"# LDA benchmark ({cfg.name})",
        "",
        f"Command: `{res['command']}`  ",
        f"Started {res['started']}; total wall time {res.get('total_wall_s', 0) / 60:.1f} min; "
        f"load average at start {res['load_start']}, at end {res.get('load_end')}.  ",
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['cores_usable']} usable), "
        f"{m['memory_gib']} GiB; {m['platform']}; Python {m['python']}.  ",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".  ",
        f"lsdask git commit: {m['git_commit']}.  ",
        "Thread pools (threadpoolctl): "
        + "; ".join(
            f"{t.get('internal_api')} {t.get('version')} ({t.get('num_threads')} threads, "
            f"{Path(t.get('filepath', '')).name})"
            for t in m["threadpools"]
        )
        + ".",
        "",
        f"Priors: alpha = {ALPHA} in total (alpha/K per topic for every method), eta = {ETA}. "
        f"Heldout: {cfg.n_test} documents per corpus, word types split 80/20 (seed {cfg.seed}), "
        "all methods scored by `lsdask.evaluate.document_completion` on their topic-word matrix. "
        f"lsdask's runs but `L=8+kmeans++` start with {gibbs_sweeps(cfg):,} collapsed Gibbs sweeps "
        "(LDA's default start, on the clock).",
        "",
        "| Row | What | Measured | Target | Result |",
        "|---|---|---|---|---|",
    ]
    for row in table_rows(res, cfg):
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Row 2: every run", ""]
    for conf in res.get("configs", []):
        lines += [
            f"### {conf['corpus']}, K={conf['K']} (budget {conf['budget_s']:.0f} s per run)",
            "",
            f"Best heldout score any method reached: {fmt(conf.get('best'))} "
            f"({conf.get('best_by')}); threshold {fmt(conf.get('threshold'))}. "
            f"{conf['n_snapshots']} of {conf.get('n_snapshots_saved')} saved snapshots scored "
            f"in {conf['eval_wall_s']:.0f} s (not on the clock).",
            "",
            "| Method | Cores | Measured cores | Passes | Stopped by | Train s (setup) | Time to "
            "threshold (pass) | Final score | Best score | s/pass (steady) | tokens/s/core |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in conf["runs"]:
            ttq = r.get("time_to_quality_s")
            setup = "" if r.get("setup_s") is None else f" ({r['setup_s']:.1f})"
            err = f" ({r['error']})" if r.get("error") else ""
            tpc = r.get("tokens_per_s_per_core")
            tpc = "-" if not tpc else f"{tpc:,.0f}"
            lines.append(
                f"| {r['label']} | {r.get('cores_note') or '-'} | "
                f"{fmt(r.get('measured_cores'), 2)} | {r['passes']:.3g} | {r['stop']}{err} | "
                f"{r['train_s']:.1f}{setup} | {fmt_s(ttq)}"
                f"{'' if ttq is None else ' (' + format(r['pass_at_quality'], '.3g') + ')'} | "
                f"{fmt(r.get('final_score'))} | {fmt(r.get('best_score'))} | "
                f"{fmt(r.get('steady_pass_s'), 2)} | "
                f"{tpc} |"
            )
        r3 = conf.get("row3")
        if r3 and r3.get("per_lap"):
            per = ", ".join(
                f"lap {k}: {v['L8']:.3f} / {v['LK']:.3f}" for k, v in r3["per_lap"].items()
            )
            lines += ["", f"Row 3 detail (L=8 / dense at each common lap): {per}."]
        lines.append("")
    lines += render_row1_details(res, cfg)
    lines += ["", "## Wall time per step", "", "| Step | Seconds |", "|---|---|"]
    for k, v in res["step_wall_s"].items():
        lines.append(f"| {k} | {v:.0f} |")
    lines += [
        "",
        f"Raw numbers: `{res.get('json_name')}`; plots: "
        + ", ".join(f"`{p}`" for p in res.get("plots", []))
        + ".",
    ]
    return "\n".join(lines) + "\n"


def render_row1_details(res: dict, cfg: Config) -> list[str]:
    r1 = res.get("row1")
    if not r1:
        return []
    lines = ["## Row 1 details and profile of the L-sparse local step", ""]
    for K, r in r1["by_K"].items():
        cs, cd = r["counters"]["sparse"] or {}, r["counters"]["dense"] or {}
        lines += [
            f"### K={K}",
            "",
            f"Topics: lsdask fit L=8, {cfg.r1_fit_laps} lap(s) on "
            f"{'20news' if cfg.r1_fit_docs is None else 'the timed documents'} "
            f"({r['fit_s']:.0f} s). "
            f"Timed: `model.doc_topic_step` on {r['docs']} documents ({r['tokens']:,.0f} tokens), "
            f"options {r['options']}. "
            f"Samples: sparse {[round(x, 3) for x in r['samples_s']['sparse']]} s, "
            f"dense {[round(x, 2) for x in r['samples_s']['dense']]} s.",
            "",
            f"Counters: L={cfg.r1_L}: {cs}; dense: {cd}.",
            "",
        ]
        p = r.get("profile", {})
        if "parts_s" in p:
            lines += [
                f"Where the L={cfg.r1_L} step's {p['median_s']['library (restarts on)']:.3f} s go "
                f"(fastest of {cfg.r1_repeats}; the replica runs one part twice, the extra time "
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
    if "exp_ns" in r1:
        lines += [
            "math.exp cost (ns per call): "
            + ", ".join(f"{k}: {v:.1f}" for k, v in r1["exp_ns"].items())
            + ".",
            "",
        ]
    return lines


def strip_for_json(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): strip_for_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [strip_for_json(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj


_PARTIAL: dict[str, Any] = {}


def write_partial(res: dict) -> None:
    """Save what is measured so far (so a crash late in the run loses nothing)."""
    path = _PARTIAL.get("path")
    if path is not None:
        Path(path).write_text(json.dumps(strip_for_json(res), indent=1) + "\n")


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------
def run(
    cfg: Config, corpora_dir: Path, work_dir: Path, out_dir: Path, stem: str, command: str
) -> dict[str, Any]:
    t_start = time.perf_counter()
    res: dict[str, Any] = {
        "command": command,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_start": load_avg(),
        "config": asdict(cfg),
        "machine": machine_info(),
        "step_wall_s": {},
        "configs": [],
        "json_name": f"{stem}.json",
    }
    work_dir.mkdir(parents=True, exist_ok=True)
    snap_root = work_dir / f"snapshots-{cfg.name}"
    ensure_corpora(corpora_dir)
    t0 = time.perf_counter()
    datasets = {name: prepare_corpus(cfg, name, corpora_dir, work_dir) for name in cfg.corpora}
    res["data"] = {name: d.info for name, d in datasets.items()}
    res["step_wall_s"]["data"] = time.perf_counter() - t0
    for name, d in datasets.items():
        log(f"data {name}: {d.info}")
    for name, data in datasets.items():
        before = None
        if name == "20news":
            before = lambda client, data=data: run_row1(cfg, client, data, res)  # noqa: E731
        run_corpus(cfg, data, snap_root, res, before)
    if "20news" not in datasets:
        log("row 1 needs 20news; skipped")
    res["row4"] = row4(cfg, res)
    plots = []
    for conf in res["configs"]:
        name = f"{stem}-{conf['corpus']}-K{conf['K']}.png"
        try:
            plot_config(conf, out_dir / name)
            plots.append(name)
        except Exception as exc:
            log(f"plot {name} failed: {exc}")
    res["plots"] = plots
    shutil.rmtree(snap_root, ignore_errors=True)
    res["load_end"] = load_avg()
    res["total_wall_s"] = time.perf_counter() - t_start
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run (< 3 min)")
    parser.add_argument(
        "--budget-seconds",
        type=float,
        default=None,
        help="wall-clock budget of one training run at 20news K=400 (default "
        f"{FULL.budget_s:g} s; {QUICK.budget_s:g} s with --quick); the other "
        "corpus/K pairs get a fixed fraction of it (README_lda.md)",
    )
    parser.add_argument("--corpora-dir", type=Path, default=REPO / "data/corpora")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=REPO / "data/lda_bench",
        help="generated data: the AP training corpus, topic snapshots",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.budget_seconds is not None:
        cfg = dataclasses.replace(cfg, budget_s=args.budget_seconds)
    command = "python pipelines/benchmarks/bench_lda.py" + " ".join(
        [""] + (argv if argv is not None else sys.argv[1:])
    )
    stem = "lda-quick" if args.quick else "lda"
    args.out.mkdir(parents=True, exist_ok=True)
    _PARTIAL["path"] = str(args.out / f"{stem}.partial.json")
    res = run(cfg, args.corpora_dir, args.work_dir, args.out, stem, command)
    md = render_markdown(res, cfg)
    (args.out / f"{stem}.md").write_text(md)
    (args.out / f"{stem}.json").write_text(json.dumps(strip_for_json(res), indent=1) + "\n")
    Path(_PARTIAL["path"]).unlink(missing_ok=True)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
