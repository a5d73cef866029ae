"""SVI-Gibbs (``LDA(algorithm="svi-gibbs")``) against online VB, fed the same minibatches.

Checks issue 27's claims (Mimno, Hoffman & Blei 2012, Fig. 1) on 20 Newsgroups
train read as a stream of minibatches: seconds per minibatch against K for
lsdask's SVI-Gibbs and for scikit-learn's and gensim's online VB given the
very same minibatches; heldout document completion (the LDA benchmark's split
and scorer) and UMass coherence after every epoch; the stored entries of
N-tilde per epoch; burn-in and kept sweeps, eta and the learning-rate delay;
and 1 against 2 Dask workers at minibatches of 1,000. See README_svigibbs.md.

The run is sized by options; the defaults are a reduced run (a few epochs and
a few peer minibatches) that fits in about half an hour on 2 shared cores.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness.cluster import local_cluster
from harness.corpora import CORPORA_DIR, WORK_DIR, load_corpora
from harness.peers import gensim_bow
from harness.report import fmt, header, step_times, table
from harness.run import Run, log, options

from lsdask import config

#: the paper's document-topic prior per topic (their footnote 1); every method uses it
ALPHA_PER_TOPIC = 0.1
KAPPA = 0.6


# --------------------------------------------------------------------------- lsdask


def lsdask_run(
    data: Any,
    K: int,
    *,
    eta: float,
    burnin: int,
    samples: int,
    minibatch: int,
    delay: float,
    epochs: int,
    seed: int = 0,
    executor: Any = None,
    score: bool = True,
    estimator: str = "draws",
    quanta: int = 16,
    weights: str = "mean",
    prune: float = config.SVI_GIBBS_PRUNE,
    keep_topics: bool = False,
    learn_alpha: bool = False,
) -> dict[str, Any]:
    """SVI-Gibbs over the training corpus (its Parquet row groups as the stream),
    timed per minibatch; scored after every epoch. Returns its record and its
    minibatches (as rows of ``data.X_train``), and its final ``lam`` if asked."""
    from lsdask.engine import SerialExecutor
    from lsdask.io.doc_stream import DocumentStream
    from lsdask.learn.svi_gibbs import SviGibbs

    stream = DocumentStream(data.train_path)
    learner = SviGibbs(
        n_topics=K, alpha=np.full(K, ALPHA_PER_TOPIC), eta=eta, burnin=burnin,
        samples=samples, minibatch_size=minibatch, delay=delay, kappa=KAPPA, n_epochs=epochs,
        progress=False, estimator=estimator, quanta=quanta, weights=weights, prune=prune,
        # passed only when set: frozen copies from before it existed run the fixed prior
        **({"learn_alpha": True} if learn_alpha else {}),
    )  # fmt: skip
    state = learner.start(stream, seed)
    state.minibatch_log = []
    times: list[float] = []
    epochs_out: list[dict[str, Any]] = []
    last = [time.perf_counter()]
    clock = [0.0]

    def on_minibatch(s: Any) -> None:
        now = time.perf_counter()
        times.append(now - last[0])
        clock[0] += now - last[0]
        last[0] = now

    def on_epoch(s: Any) -> None:
        row: dict[str, Any] = {
            "epoch": s.epoch,
            "seconds": clock[0],
            "nonzero": s.topics.n_stored,
            "nonzero_frac": s.topics.n_stored / (K * stream.n_features),
        }
        if score:
            prior = getattr(s.topics, "prior", None)
            row.update(evaluate(data, s.topics.lam(), eta, None if prior is None else prior.alpha))
        epochs_out.append(row)
        log(f"  lsdask K={K} epoch {s.epoch}: {row}")
        last[0] = time.perf_counter()  # scoring is not on the clock

    learner.run(
        stream, executor or SerialExecutor(), state, on_epoch=on_epoch, on_minibatch=on_minibatch
    )
    return {
        "seconds_per_minibatch": float(np.mean(times)),
        "seconds_per_minibatch_last_epoch": float(
            np.mean(times[-int(np.ceil(stream.n_docs / minibatch)) :])
        ),
        "minibatches": len(times),
        "epochs": epochs_out,
        "docs_per_second": stream.n_docs * epochs / clock[0],
        "driver_share": state.driver_seconds / (state.driver_seconds + state.task_seconds),
        "load": load_now(),
        "log": state.minibatch_log,
        **({"lam": state.topics.lam()} if keep_topics else {}),
    }


def load_now() -> float:
    """The machine's 1-minute load average now (reported beside every timing)."""
    return round(os.getloadavg()[0], 2)


def evaluate(
    data: Any, lam: np.ndarray, eta: float, learned: np.ndarray | None = None
) -> dict[str, float]:
    """Heldout document completion and UMass coherence of topics ``lam`` (K, V, the
    Dirichlet parameters: eta plus the topic's counts); UMass also over the *live*
    topics alone, those holding at least half a fair share (``N / (2 K)``) of the
    counts ``lam - eta``: a method's unused topics show whatever its updates
    leave in them (rare words under sklearn's random start, a few
    smoothing-bucket tokens under SVI-Gibbs) and decide the worst decile.
    Every method is completed under the fixed prior; a ``learned`` one's total,
    and completion under it, are added where given."""
    from lsdask.evaluate import document_completion, umass_coherence

    K = lam.shape[0]
    topics = lam / lam.sum(axis=1, keepdims=True)
    heldout = document_completion(data.A, data.B, topics, ALPHA_PER_TOPIC * K)
    coherence = umass_coherence(topics, iter([data.X_train]), 10)
    worst = np.sort(coherence)[: max(1, K // 10)]
    mass = lam.sum(axis=1) - eta * lam.shape[1]
    live = coherence[mass >= mass.sum() / (2 * K)]
    own = {}
    if learned is not None:
        own = {
            "alpha_total": float(np.sum(learned)),
            "heldout_own_prior": float(document_completion(data.A, data.B, topics, learned)),
        }
    return {
        **own,
        "heldout": float(heldout),
        "umass_mean": float(np.mean(coherence)),
        "umass_worst_decile": float(np.mean(worst)),
        "live_topics": int(live.size),
        "umass_live_mean": float(np.mean(live)) if live.size else float("nan"),
        "umass_live_worst_decile": float(np.mean(np.sort(live)[: max(1, live.size // 10)]))
        if live.size
        else float("nan"),
    }


def rows_of(data: Any, log_ids: list[np.ndarray]) -> list[np.ndarray]:
    """The logged minibatches (doc ids) as rows of ``data.X_train`` (corpus order)."""
    from lsdask.io.corpus import Corpus

    ids = np.concatenate([b.load().doc_ids for b in Corpus.open(data.train_path).batches])
    where = {int(d): i for i, d in enumerate(ids)}
    return [np.array([where[int(d)] for d in mb]) for mb in log_ids]


# --------------------------------------------------------------------------- peers


def sklearn_run(
    data: Any, K: int, batches: list[np.ndarray], *, eta: float, delay: float, score_every: int
) -> dict[str, Any]:
    """scikit-learn's online VB, ``partial_fit`` on each given minibatch."""
    from sklearn.decomposition import LatentDirichletAllocation

    lda = LatentDirichletAllocation(
        n_components=K, doc_topic_prior=ALPHA_PER_TOPIC, topic_word_prior=eta,
        learning_method="online", learning_decay=KAPPA, learning_offset=delay,
        total_samples=data.X_train.shape[0], n_jobs=1, random_state=0,
    )  # fmt: skip
    return _peer(
        data, batches, lambda X: lda.partial_fit(X), lambda: lda.components_, eta, score_every
    )


def gensim_run(
    data: Any,
    K: int,
    batches: list[np.ndarray],
    *,
    eta: float,
    delay: float,
    score_every: int,
    alpha: str = "fixed",
) -> dict[str, Any]:
    """gensim's online VB, ``update`` on each given minibatch (one chunk each);
    ``alpha="auto"``: gensim learns an asymmetric prior, from its own start of
    1 / K per topic."""
    from gensim.models import LdaModel

    V = data.X_train.shape[1]
    model = LdaModel(
        num_topics=K, id2word={i: str(i) for i in range(V)},
        alpha="auto" if alpha == "auto" else ALPHA_PER_TOPIC, eta=eta,
        decay=KAPPA, offset=delay, chunksize=max(len(b) for b in batches), update_every=1,
        passes=1, iterations=50, eval_every=None, random_state=0,
    )  # fmt: skip
    return _peer(
        data,
        batches,
        lambda X: model.update(gensim_bow(X), chunks_as_numpy=True),
        model.state.get_lambda,  # lambda (get_topics() is it normalized)
        eta,
        score_every,
        (lambda: np.asarray(model.alpha)) if alpha == "auto" else None,
    )


def _peer(
    data: Any,
    batches: list[np.ndarray],
    step: Any,
    topics: Any,
    eta: float,
    score_every: int,
    prior: Any = None,
) -> dict:
    times: list[float] = []
    scores: list[dict[str, Any]] = []
    for i, rows in enumerate(batches, start=1):
        X = data.X_train[rows]
        t0 = time.perf_counter()
        step(X)
        times.append(time.perf_counter() - t0)
        if score_every and i % score_every == 0:
            learned = None if prior is None else prior()
            scores.append({"minibatches": i, "seconds": float(np.sum(times)), "load": load_now(),
                           **evaluate(data, np.asarray(topics()), eta, learned)})  # fmt: skip
            log(f"  peer after {i} minibatches: {scores[-1]}")
    return {
        "seconds_per_minibatch": float(np.mean(times)),
        "minibatches": len(times),
        "scores": scores,
        "load": load_now(),
    }


# --------------------------------------------------------------------------- memo


def memo_run(data: Any, K: int, *, eta: float, laps: int) -> dict[str, Any]:
    """lsdask's memoized LDA at the same priors (the quality reference)."""
    import lsdask

    t0 = time.perf_counter()
    m = lsdask.LDA(
        K, alpha=ALPHA_PER_TOPIC * K, eta=eta, n_laps=laps, client="sync", random_state=0,
        init="kmeans++",
    ).fit(data.train_path)  # fmt: skip
    return {"seconds": time.perf_counter() - t0, "laps": int(m.n_laps_), "load": load_now(),
            **evaluate(data, np.asarray(m.components_), eta)}  # fmt: skip


# --------------------------------------------------------------------------- scaling


def scaling_run(
    data: Any,
    K: int,
    minibatch: int,
    epochs: int,
    eta: float = 0.1,
    estimator: str = "draws",
    quanta: int = 16,
    weights: str = "mean",
    prune: float = config.SVI_GIBBS_PRUNE,
    learn_alpha: bool = False,
) -> dict[str, Any]:
    """Documents per second with 1 and 2 LocalCluster workers (and in-process),
    with the N-hat ``estimator`` (the first of ``--estimators``) and the prior
    fixed or learned (the first of ``--alpha``)."""
    from distributed import get_task_stream

    from lsdask.engine import make_executor

    out: dict[str, Any] = {"control": cpu_control()}
    log(f"  control: {out['control']}")
    for workers in (1, 2):
        cluster, client = local_cluster(workers)
        try:
            client.run(warm_kernels)  # every worker compiles or loads them before the clock
            before = cpu_now(client)
            with get_task_stream(client) as stream:
                r = lsdask_run(
                    data, K, eta=eta, burnin=3, samples=2, minibatch=minibatch, delay=10.0,
                    epochs=epochs, executor=make_executor(client), score=False,
                    estimator=estimator, quanta=quanta, weights=weights, prune=prune,
                    learn_alpha=learn_alpha,
                )  # fmt: skip
            out[f"{workers} workers"] = {
                "docs_per_second": r["docs_per_second"],
                "seconds_per_minibatch": r["seconds_per_minibatch"],
                "driver_share": r["driver_share"],
                "load": r["load"],
                "K": K,
                "eta": eta,
                "estimator": estimator,
                "weights": weights,
                "prune": prune,
                "alpha": "auto" if learn_alpha else "fixed",
                "breakdown": step_breakdown(client, before, r["minibatches"], stream.data),
            }
        finally:
            client.close()
            cluster.close()
        log(f"  scaling {workers} workers: {out[f'{workers} workers']}")
    return out


def _phases(reset: bool = False) -> dict[str, tuple[float, int]]:
    from lsdask.learn import svi_gibbs

    # none from code older than the phase timers (an A/B run of a frozen copy)
    timers = getattr(svi_gibbs, "phase_seconds", None)
    return timers(reset) if timers is not None else {}


def cpu_now(client: Any) -> dict[str, Any]:
    """The driver's and each worker's process CPU seconds now, the phase timers
    reset."""
    _phases(reset=True)
    client.run(_phases, True)
    return {"driver": time.process_time(), "workers": client.run(time.process_time)}


def step_breakdown(
    client: Any, before: dict[str, Any], steps: int, stream: list[dict[str, Any]]
) -> dict[str, Any]:
    """Where a step's time went, per step: CPU ms of each phase in the tasks
    (mean over the workers) and in the driver, each process's CPU ms in all
    (the driver's process holds the scheduler), and from the scheduler's task
    stream (wall ms) the longest part, the mean part and the gap from a step's
    last part ending to the next step's first part starting."""
    workers = client.run(_phases)
    cpu = client.run(time.process_time)
    out: dict[str, Any] = {}
    for name in ("read", "replica", "view", "sample", "sum"):
        vals = [w[name][0] for w in workers.values() if name in w]
        if vals:
            out[f"task {name}"] = 1000 * float(np.mean(vals)) / steps
    for name, (sec, _) in _phases().items():
        out[f"driver {name}"] = 1000 * sec / steps
    out["driver process CPU"] = 1000 * (time.process_time() - before["driver"]) / steps
    out["worker process CPU"] = (
        1000 * float(np.mean([cpu[w] - before["workers"][w] for w in cpu])) / steps
    )
    parts = sorted(
        (ss["start"], ss["stop"])
        for t in stream
        if t["key"].startswith("GibbsTask")
        for ss in t["startstops"]
        if ss["action"] == "compute"
    )
    n = len(cpu)
    if len(parts) >= 2 * n:
        groups = [parts[i : i + n] for i in range(0, len(parts) - n + 1, n)]
        out["parts: longest (wall)"] = 1000 * float(
            np.mean([max(b - a for a, b in g) for g in groups])
        )
        out["parts: mean (wall)"] = 1000 * float(
            np.mean([np.mean([b - a for a, b in g]) for g in groups])
        )
        gaps = [min(a for a, _ in h) - max(b for _, b in g) for g, h in itertools.pairwise(groups)]
        out["gap between steps (wall, median)"] = 1000 * float(np.median(gaps))
    return out


def _busy(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def cpu_control(n: int = 20_000_000) -> dict[str, float]:
    """How much faster the same pure-Python work runs split over 2 processes than
    in 1: what the machine gives a second worker at the moment (2.0 on two idle
    cores)."""
    from multiprocessing import get_context

    t0 = time.perf_counter()
    _busy(2 * n)
    one = time.perf_counter() - t0
    with get_context("spawn").Pool(2) as pool:
        pool.map(_busy, [1000, 1000])  # the processes started before the clock
        t0 = time.perf_counter()
        pool.map(_busy, [n, n])
        two = time.perf_counter() - t0
    return {"one_process_s": one, "two_processes_s": two, "speedup": one / two, "load": load_now()}


def warm_kernels() -> None:
    """Sample a tiny document, so that this process has the kernels compiled (or
    loaded from numba's cache) before anything is timed."""
    import scipy.sparse as sp

    from lsdask.models.sparse_topics import SparseTopics, sample_counts

    view = SparseTopics.at_prior(2, 3, 0.4).view(np.arange(3), np.full(2, 0.1), step=1)
    sample_counts(sp.csr_matrix(np.ones((1, 3))), np.zeros(1, np.int64), view, 1, 1, seed=0)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = options(__doc__ or "", "tiny sizes, results under svigibbs-quick.*")
    parser.add_argument("--corpora-dir", type=Path, default=CORPORA_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--epochs", type=int, default=3, help="lsdask epochs (default 3)")
    parser.add_argument(
        "--peer-minibatches", type=int, default=20,
        help="minibatches the peers are timed on at K=100 and K=1000 (default 20)",
    )  # fmt: skip
    parser.add_argument(
        "--peer-epochs", type=float, default=1.0,
        help="epochs of the same minibatches the peers train at the quality K (default 1)",
    )  # fmt: skip
    parser.add_argument("--quality-k", type=int, default=200)
    parser.add_argument("--memo-laps", type=int, default=10)
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument(
        "--only-scaling", action="store_true",
        help="run only the 1- against 2-worker comparison (results/svigibbs-scaling.*)",
    )  # fmt: skip
    parser.add_argument("--scaling-epochs", type=int, default=1)
    parser.add_argument("--scaling-k", type=int, default=100)
    parser.add_argument("--scaling-eta", type=float, default=0.1)
    parser.add_argument(
        "--minibatch", type=int, default=100,
        help="documents per minibatch of the quality runs, lsdask's and the peers' (default "
        "100; the cost rows always use 100)",
    )  # fmt: skip
    parser.add_argument(
        "--only-grid", action="store_true",
        help="run only lsdask's grid at eta=0.4: (B, S) and delay at K=200, and K=1000 "
        "(results/svigibbs-grid.*)",
    )  # fmt: skip
    parser.add_argument(
        "--grid", default="200:1:1:10,200:5:5:10,200:3:2:1,200:3:2:100,1000:3:2:10",
        help="--only-grid's runs, K:B:S:delay comma-separated",
    )  # fmt: skip
    parser.add_argument("--grid-eta", type=float, default=0.4)
    parser.add_argument("--grid-name", default="grid", help="results/svigibbs-NAME.*")
    parser.add_argument(
        "--only-quality", action="store_true",
        help="run only the quality comparison at --quality-eta, every method at that eta "
        "(results/svigibbs-quality-etaETA.*)",
    )  # fmt: skip
    parser.add_argument("--quality-eta", type=float, default=0.4)
    parser.add_argument("--quality-sweeps", default="3:2,5:5", help="B:S of lsdask's runs")
    parser.add_argument(
        "--estimators", default="draws",
        help="N-hat estimators of --only-quality's and --only-grid's lsdask runs, comma-"
        "separated: draws, rao-blackwell (default draws); --only-scaling uses the first",
    )  # fmt: skip
    parser.add_argument(
        "--quanta", type=int, default=16,
        help="quanta per token of the rao-blackwell estimator (default 16)",
    )  # fmt: skip
    parser.add_argument(
        "--weights", default="mean",
        help="what lsdask's runs sample against, comma-separated for --only-quality and "
        "--only-grid: mean (E[phi], the default), geometric (exp E[log phi], the paper's)",
    )  # fmt: skip
    parser.add_argument(
        "--prune", type=float, default=config.SVI_GIBBS_PRUNE,
        help="lsdask drops entries of N-tilde below PRUNE * eta every 1,600 documents "
        f"(default {config.SVI_GIBBS_PRUNE:g}, the library's; 0 keeps every entry, the "
        "paper's update)",
    )  # fmt: skip
    parser.add_argument(
        "--alpha", default="fixed",
        help="lsdask's document-topic prior in --only-quality and --only-grid, comma-"
        "separated (--only-scaling takes the first): fixed "
        f"({ALPHA_PER_TOPIC} per topic, the peers'), auto (learned from that start)",
    )  # fmt: skip
    parser.add_argument(
        "--peer-alpha", default="fixed", choices=("fixed", "auto"),
        help="--only-quality's peers at the fixed prior (scikit-learn and gensim), or "
        "gensim alone learning its prior (alpha='auto'; scikit-learn has no such option)",
    )  # fmt: skip
    parser.add_argument(
        "--skip-peers", action="store_true",
        help="--only-quality without the peers (their numbers are in earlier results)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    stem = "svigibbs-quick" if args.quick else "svigibbs"
    if args.only_scaling:
        stem += "-scaling"
    if args.only_grid:
        stem += f"-{args.grid_name}"
    if args.only_quality:
        stem += f"-quality-eta{args.quality_eta:g}".replace(".", "")
        if args.quality_k != 200:
            stem += f"-k{args.quality_k}"
    if args.minibatch != 100:
        stem += f"-mb{args.minibatch}"
    if args.estimators != "draws":  # e.g. -rao-blackwell-doc16, -draws-rao-blackwell16
        stem += "-" + args.estimators.replace(",", "-") + str(args.quanta)
    stem += "-" + args.weights.replace(",", "-")  # -mean, -geometric, -mean-geometric
    if args.prune != config.SVI_GIBBS_PRUNE:
        stem += f"-prune{args.prune:g}"
    if args.alpha != "fixed":
        stem += "-alpha-" + args.alpha.replace(",", "-")
    if args.peer_alpha != "fixed":
        stem += "-peer-alpha-" + args.peer_alpha
    # the runs that take one estimator and one weight take the first of each
    estimator, weights = args.estimators.split(",")[0], args.weights.split(",")[0]
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    run = Run(__file__, stem, args.out, argv, settings=settings)
    data = run.step(
        "corpora", lambda: load_corpora(["20news"], args.corpora_dir, args.work_dir)["20news"]
    )
    res = run.res
    res["corpus"] = data.info
    if args.only_quality:
        res["quality"] = quality_run(run, data, args)
        res["quality_k"] = args.quality_k
        run.finish(render)
        return
    if args.only_grid:
        grid: dict[str, Any] = {}
        eta = args.grid_eta
        lsdask_run(data, 10, eta=0.1, burnin=0, samples=1, minibatch=100, delay=10.0, epochs=1,
                   score=False)  # fmt: skip
        for spec, est, w, a in itertools.product(
            args.grid.split(","), args.estimators.split(","), args.weights.split(","),
            args.alpha.split(","),
        ):  # fmt: skip
            K, B, S = (int(x) for x in spec.split(":")[:3])
            delay = float(spec.split(":")[3])
            key = f"K={K} B={B} S={S} delay={delay:g} eta={eta:g}{_label(est, args.quanta, w, a)}"
            r = run.step(key, lambda K=K, B=B, S=S, delay=delay, est=est, w=w, a=a: lsdask_run(
                data, K, eta=eta, burnin=B, samples=S, minibatch=args.minibatch, delay=delay,
                epochs=args.epochs, estimator=est, quanta=args.quanta, weights=w,
                prune=args.prune, learn_alpha=a == "auto"))  # fmt: skip
            r.pop("log")
            grid[key] = r
        res["grid"] = grid
        run.finish(render_grid)
        return
    if args.only_scaling:
        lsdask_run(data, 10, eta=0.1, burnin=0, samples=1, minibatch=100, delay=10.0, epochs=1,
                   score=False)  # fmt: skip
        res["scaling"] = run.step(
            "scaling",
            lambda: scaling_run(
                data,
                20 if args.quick else args.scaling_k,
                1000,
                args.scaling_epochs,
                args.scaling_eta,
                estimator,
                args.quanta,
                weights,
                args.prune,
                args.alpha.split(",")[0] == "auto",
            ),
        )
        run.finish(render_scaling)
        return
    epochs = 1 if args.quick else args.epochs
    peer_n = 3 if args.quick else args.peer_minibatches

    # warm up the kernels (compile or load from the cache) outside every clock
    lsdask_run(data, 10, eta=0.1, burnin=0, samples=1, minibatch=100, delay=10.0, epochs=1,
               score=False)  # fmt: skip

    # cost against K, minibatches of 100
    cost: dict[str, Any] = {}
    for K in (100, 1000):
        r = run.step(
            f"lsdask K={K}",
            lambda K=K: lsdask_run(
                data,
                K,
                eta=0.1,
                burnin=3,
                samples=2,
                minibatch=100,
                delay=10.0,
                epochs=epochs,
                estimator=estimator,
                quanta=args.quanta,
                weights=weights,
                prune=args.prune,
            ),
        )
        batches = rows_of(data, r.pop("log"))
        cost[f"lsdask K={K}"] = r
        for name, fn in (("sklearn", sklearn_run), ("gensim", gensim_run)):
            cost[f"{name} K={K}"] = run.step(
                f"{name} K={K}",
                lambda fn=fn, K=K, b=batches: fn(
                    data, K, b[:peer_n], eta=0.1, delay=10.0, score_every=0
                ),
            )
    res["cost"] = cost

    # quality at the quality K: lsdask for (B, S), delay, eta; the peers on its minibatches
    Kq = 20 if args.quick else args.quality_k
    quality: dict[str, Any] = {}
    configs = [(3, 2, 10.0, 0.1), (3, 2, 10.0, 0.4), (1, 1, 10.0, 0.1), (5, 5, 10.0, 0.1),
               (3, 2, 1.0, 0.1), (3, 2, 100.0, 0.1)]  # fmt: skip
    main_log = None
    for B, S, delay, eta in configs[: 1 if args.quick else None]:
        key = f"B={B} S={S} delay={delay:g} eta={eta:g}"
        key += _label(estimator, args.quanta, weights)
        r = run.step(
            f"quality {key}",
            lambda B=B, S=S, delay=delay, eta=eta: lsdask_run(
                data,
                Kq,
                eta=eta,
                burnin=B,
                samples=S,
                minibatch=args.minibatch,
                delay=delay,
                epochs=epochs,
                estimator=estimator,
                quanta=args.quanta,
                weights=weights,
                prune=args.prune,
            ),
        )
        log_ids = r.pop("log")
        if main_log is None:
            main_log = log_ids
        quality[key] = r
    assert main_log is not None
    batches = rows_of(data, main_log)
    n_peer = round(args.peer_epochs * len(batches) / epochs)
    per_epoch = int(np.ceil(data.X_train.shape[0] / args.minibatch))
    for name, fn in (("sklearn", sklearn_run), ("gensim", gensim_run)):
        quality[name] = run.step(
            f"quality {name}",
            lambda fn=fn: fn(
                data, Kq, batches[:n_peer], eta=0.1, delay=10.0, score_every=per_epoch
            ),
        )
    laps = 2 if args.quick else args.memo_laps
    quality["memo"] = run.step("quality memo", lambda: memo_run(data, Kq, eta=0.1, laps=laps))
    res["quality"] = quality
    res["quality_k"] = Kq

    if not args.skip_scaling:
        res["scaling"] = run.step(
            "scaling", lambda: scaling_run(data, 20 if args.quick else 100, 1000, 1)
        )
    run.finish(render)


def quality_run(run: Run, data: Any, args: Any) -> dict[str, Any]:
    """lsdask's sweeps at one eta, the peers on its first run's minibatches and
    memoized LDA, all at that eta."""
    eta, Kq = args.quality_eta, args.quality_k
    lsdask_run(data, 10, eta=0.1, burnin=0, samples=1, minibatch=100, delay=10.0, epochs=1,
               score=False)  # fmt: skip
    quality: dict[str, Any] = {}
    main_log = None
    for spec, est, w, a in itertools.product(
        args.quality_sweeps.split(","), args.estimators.split(","), args.weights.split(","),
        args.alpha.split(","),
    ):  # fmt: skip
        B, S = (int(x) for x in spec.split(":"))
        key = f"B={B} S={S} delay=10 eta={eta:g}{_label(est, args.quanta, w, a)}"
        r = run.step(f"quality {key}", lambda B=B, S=S, est=est, w=w, a=a: lsdask_run(
            data, Kq, eta=eta, burnin=B, samples=S, minibatch=args.minibatch, delay=10.0,
            epochs=args.epochs, estimator=est, quanta=args.quanta, weights=w,
            prune=args.prune, learn_alpha=a == "auto"))  # fmt: skip
        log_ids = r.pop("log")
        main_log = main_log or log_ids
        quality[key] = r
    assert main_log is not None
    if args.skip_peers:
        return quality
    batches = rows_of(data, main_log)
    n_peer = round(args.peer_epochs * len(batches) / args.epochs)
    per_epoch = int(np.ceil(data.X_train.shape[0] / args.minibatch))
    peers: list[tuple[str, Any]] = [("sklearn", sklearn_run), ("gensim", gensim_run)]
    if args.peer_alpha == "auto":  # scikit-learn cannot learn its prior
        peers = [("gensim alpha auto", functools.partial(gensim_run, alpha="auto"))]
    for name, fn in peers:
        quality[name] = run.step(
            f"quality {name}",
            lambda fn=fn: fn(
                data, Kq, batches[:n_peer], eta=eta, delay=10.0, score_every=per_epoch
            ),
        )
    if args.memo_laps > 0:
        quality["memo"] = run.step(
            "quality memo", lambda: memo_run(data, Kq, eta=eta, laps=args.memo_laps)
        )
    return quality


def _label(estimator: str, quanta: int, weights: str, alpha: str = "fixed") -> str:
    """A run's key suffix naming its N-hat estimator (none for the draws), what
    it samples against (none for the paper's geometric weights) and a learned
    prior (none for the fixed one)."""
    est = "" if estimator == "draws" else f" RB Q={quanta}"
    learned = " alpha auto" if alpha == "auto" else ""
    return est + ("" if weights == "geometric" else f" {weights}") + learned


def render(res: dict[str, Any]) -> str:
    out = header(res, "SVI-Gibbs against online VB (20 Newsgroups train as a stream)")
    out += [step_times(res), ""]
    cost = res.get("cost")
    if cost is None:
        return "\n".join(out + quality_table(res)) + "\n"
    out += ["## Seconds per minibatch of 100 documents", ""]
    rows = []
    for who in ("lsdask", "sklearn", "gensim"):
        a, b = cost[f"{who} K=100"], cost[f"{who} K=1000"]
        rows.append([who, fmt(a["seconds_per_minibatch"]), fmt(b["seconds_per_minibatch"]),
                     fmt(b["seconds_per_minibatch"] / a["seconds_per_minibatch"]),
                     str(a["minibatches"])])  # fmt: skip
    out += table(["method", "K=100 s", "K=1000 s", "growth", "minibatches timed"], rows)
    ls = cost["lsdask K=1000"]["seconds_per_minibatch"]
    out += ["", "At K=1000, peer seconds per minibatch / lsdask's: "
            + ", ".join(f"{p} {cost[f'{p} K=1000']['seconds_per_minibatch'] / ls:.1f}x"
                        for p in ("sklearn", "gensim")) + ".", ""]  # fmt: skip
    out += ["## Stored entries of N-tilde at K=1000 by epoch", ""]
    out += table(["epoch", "non-zero", "of K x V"],
                 [[str(e["epoch"]), str(e["nonzero"]), f"{100 * e['nonzero_frac']:.2f}%"]
                  for e in cost["lsdask K=1000"]["epochs"]])  # fmt: skip
    out += quality_table(res)
    if "scaling" in res:
        out += scaling_table(res["scaling"])
    return "\n".join(out) + "\n"


def quality_table(res: dict[str, Any]) -> list[str]:
    q = res["quality"]
    out = ["", f"## Quality at K={res['quality_k']} (heldout nats/token, UMass)", ""]
    rows = []
    for key, r in q.items():
        if key.startswith(("sklearn", "gensim")):
            for s in r["scores"]:
                rows.append(
                    [
                        key,
                        f"{s['minibatches']} mb",
                        fmt(s["heldout"], 4),
                        fmt(s["umass_mean"]),
                        fmt(s["umass_worst_decile"]),
                        *live_cells(s),
                        fmt(s["seconds"]),
                        fmt(s.get("load"), 1),
                    ]
                )
        elif key == "memo":
            rows.append(
                [
                    "lsdask memo",
                    f"{r['laps']} laps",
                    fmt(r["heldout"], 4),
                    fmt(r["umass_mean"]),
                    fmt(r["umass_worst_decile"]),
                    *live_cells(r),
                    fmt(r["seconds"]),
                    fmt(r.get("load"), 1),
                ]
            )
        else:
            for e in r["epochs"]:
                rows.append([f"svi-gibbs {key}", f"epoch {e['epoch']}", fmt(e["heldout"], 4),
                             fmt(e["umass_mean"]), fmt(e["umass_worst_decile"]),
                             *live_cells(e), fmt(e["seconds"]),
                             fmt(r.get("load"), 1)])  # fmt: skip
    head = ["method", "when", "heldout", "UMass mean", "UMass worst 10%", "live topics",
            "live UMass mean", "live UMass worst 10%", "train s", "load 1 min"]  # fmt: skip
    out += table(head, rows)
    learned = []
    for key, r in q.items():
        # lsdask's rows are per epoch, a peer's per so many minibatches
        for e in r.get("epochs", []):
            if "heldout_own_prior" in e:
                learned.append([key, f"epoch {e['epoch']}", *_prior_cells(e)])
        for e in r.get("scores", []):
            if "heldout_own_prior" in e:
                learned.append([key, f"after {e['minibatches']} mb", *_prior_cells(e)])
    if learned:
        out += ["", "Learned priors: the total sum_k alpha_k, and heldout completion under "
                "the learned prior beside that under the fixed 0.1 per topic (the column above)",
                ""]  # fmt: skip
        out += table(["method", "when", "alpha total", "heldout, own prior", "heldout, fixed"],
                     learned)  # fmt: skip
    return out


def _prior_cells(e: dict[str, Any]) -> list[str]:
    """A learned prior's total, and heldout under it and under the fixed prior."""
    return [fmt(e["alpha_total"]), fmt(e["heldout_own_prior"], 4), fmt(e["heldout"], 4)]


def live_cells(r: dict[str, Any]) -> list[str]:
    """The live topics' columns (absent from runs scored before they were kept)."""
    return [fmt(r.get("live_topics")), fmt(r.get("umass_live_mean")),
            fmt(r.get("umass_live_worst_decile"))]  # fmt: skip


def scaling_table(s: dict[str, Any]) -> list[str]:
    control = s.get("control")
    s = {k: v for k, v in s.items() if k != "control"}
    first = next(iter(s.values()))
    what = f"K={first.get('K', 100)}, eta={first.get('eta', 0.1)}, B=3, S=2, N-hat: "
    what += first.get("estimator", "draws")
    what += ", alpha learned" if first.get("alpha") == "auto" else ""
    out = ["", f"## Scaling, minibatches of 1,000 ({what})", ""]
    out += table(["workers", "docs/s", "s per minibatch", "driver share", "load 1 min"],
                 [[k, fmt(v["docs_per_second"]), fmt(v["seconds_per_minibatch"]),
                   fmt(v.get("driver_share")), fmt(v.get("load"), 1)]
                  for k, v in s.items()])  # fmt: skip
    one, two = s.get("1 workers"), s.get("2 workers")
    if one and two:
        ratio = two["docs_per_second"] / one["docs_per_second"]
        out += ["", f"2 workers / 1 worker, documents per second: {ratio:.2f}x."]
    rows = sorted({k for v in s.values() for k in v.get("breakdown", {})}, key=_breakdown_order)
    if rows:
        out += ["", "Where a step's time goes (ms per step: CPU of each phase in a task, the mean "
                "over the workers, and in the driver; each process's CPU in all; wall times "
                "from the scheduler's task stream):", ""]  # fmt: skip
        out += table(["", *s], [[k, *[fmt(v.get("breakdown", {}).get(k), 1) for v in s.values()]]
                                for k in rows])  # fmt: skip
    if control:
        out += ["", f"Control, run just before: the same pure-Python work split over 2 "
                f"processes ran {control['speedup']:.2f}x as fast as in 1 process "
                f"({fmt(control['one_process_s'])} s against {fmt(control['two_processes_s'])} s, "
                f"load {fmt(control.get('load'), 1)}): 2.0 where the machine has a second core "
                "to give."]  # fmt: skip
    return out


def _breakdown_order(key: str) -> int:
    order = ["task read", "task replica", "task view", "task sample", "task sum",
             "worker process CPU", "driver driver_start", "driver driver_update",
             "driver process CPU", "parts: mean (wall)", "parts: longest (wall)",
             "gap between steps (wall, median)"]  # fmt: skip
    return order.index(key) if key in order else len(order)


def render_grid(res: dict[str, Any]) -> str:
    out = header(res, "SVI-Gibbs: sweeps, delay, eta and K (20 Newsgroups train)")
    mb = res.get("settings", {}).get("minibatch", 100)
    out += [step_times(res), "", f"Minibatches of {mb}, kappa 0.6, alpha 0.1 per topic (the "
            "start of a learned one).", ""]  # fmt: skip
    rows = []
    for key, r in res["grid"].items():
        for e in r["epochs"]:
            rows.append([key, str(e["epoch"]), fmt(e["heldout"], 4), fmt(e["umass_mean"]),
                         fmt(e["umass_worst_decile"]), f"{100 * e['nonzero_frac']:.2f}%",
                         fmt(e["seconds"])])  # fmt: skip
    out += table(["run", "epoch", "heldout", "UMass mean", "UMass worst 10%",
                  "non-zero N-tilde of K x V", "train s"], rows)  # fmt: skip
    out += [
        "",
        "Seconds per minibatch: "
        + ", ".join(f"{k} {fmt(r['seconds_per_minibatch'])}" for k, r in res["grid"].items())
        + ".",
    ]
    return "\n".join(out) + "\n"


def render_scaling(res: dict[str, Any]) -> str:
    out = header(res, "SVI-Gibbs: 1 against 2 Dask workers (20 Newsgroups train)")
    out += [step_times(res), *scaling_table(res["scaling"])]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
