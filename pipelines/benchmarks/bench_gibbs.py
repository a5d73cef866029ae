"""The collapsed Gibbs sampler of ``LDA(init="gibbs")`` against a plain one and tomotopy's.

On row 2's training documents of ``bench_lda.py`` (AP and 20 Newsgroups,
K = 100 and 400, alpha = 0.5 in total, eta = 0.1), each sampler runs the
same number of sweeps from a random start, side by side in one run:

- ``plain``: the textbook sweep, every token's weights over all K topics
  (numba, one thread), the reference;
- ``lsdask 1 run``: ``gibbs_sample(..., parts=1)``, the exact two-bucket
  sampler in one thread;
- ``lsdask 2 runs``: ``parts=2``, the library's default (two halves of the
  documents in two threads);
- ``tomotopy 1`` / ``tomotopy 2``: ``LDAModel.train(n, workers=1 or 2)``.

It reports wall and CPU seconds per sweep (setup included, spread over the
sweeps), the ratios of interest, and the heldout score (App. E document
completion, as row 2) of each sampler's topic-word counts after the sweeps,
so that a faster sampler that mixes worse would show.

With ``--per-topic-alpha A`` every configuration runs twice, at the
benchmark's prior and at ``A`` per topic (tomotopy's default start is 0.1 per
topic, the issue's example 0.5), and a second table gives each sampler's cost
at the large prior over its cost at the small one: a sampler whose prior
bucket costs O(K) slows down as more draws land there.

Usage::

    python pipelines/benchmarks/bench_gibbs.py [--quick] [--sweeps 100] [--per-topic-alpha 0.5]

Writes ``results/gibbs.md`` and ``results/gibbs.json`` (``gibbs-quick.*``
with ``--quick``: AP only, K=100, 10 sweeps). See ``README_gibbs.md``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numba
import numpy as np
from harness import corpora, peers
from harness.priors import ALPHA, ETA
from harness.report import header, table
from harness.run import Run, log, options
from harness.scoring import score_counts
from harness.timing import timed

from lsdask.learn.gibbs_start import gibbs_sample, random_start

SEED = 0
SAMPLERS = ("plain", "lsdask 1 run", "lsdask 2 runs", "tomotopy 1", "tomotopy 2")


@numba.njit(nogil=True, cache=True)
def plain_sweep(doc_ptr, words, z, ndk, nwk, nk, a, eta, uniforms):
    """One sweep with every token's weights over all K topics (the reference)."""
    K = nk.shape[0]
    V_eta = nwk.shape[0] * eta
    inverse = np.empty(K)  # 1 / (n_k + V eta), kept current: a multiply per topic, not a divide
    for j in range(K):
        inverse[j] = 1.0 / (nk[j] + V_eta)
    cumulative = np.empty(K)
    for d in range(doc_ptr.shape[0] - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = words[i]
            k = z[i]
            ndk[d, k] -= 1
            nwk[w, k] -= 1
            nk[k] -= 1
            inverse[k] = 1.0 / (nk[k] + V_eta)
            total = 0.0
            for j in range(K):
                total += (ndk[d, j] + a) * (nwk[w, j] + eta) * inverse[j]
                cumulative[j] = total
            target = uniforms[i] * total
            k = 0
            while k < K - 1 and cumulative[k] <= target:
                k += 1
            z[i] = k
            ndk[d, k] += 1
            nwk[w, k] += 1
            nk[k] += 1
            inverse[k] = 1.0 / (nk[k] + V_eta)


def run_plain(X, K: int, sweeps: int, seed: int, alpha: float = ALPHA) -> np.ndarray:
    rng = np.random.default_rng(seed)
    doc_ptr, words, z, ndk, nwk, nk = random_start(X, K, rng)  # the same start as gibbs_sample's
    for _ in range(sweeps):
        plain_sweep(doc_ptr, words, z, ndk, nwk, nk, alpha / K, ETA, rng.random(z.shape[0]))
    return nwk.T.astype(np.float64)


def run_lsdask(X, K: int, sweeps: int, seed: int, parts: int, alpha: float = ALPHA) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return gibbs_sample(X, K, alpha, ETA, sweeps, rng, False, parts).topic_word


def run_tomotopy(
    X, K: int, sweeps: int, seed: int, workers: int, alpha: float = ALPHA
) -> tuple[np.ndarray, float]:
    """Topic-word counts after ``sweeps``, and the wall and CPU seconds of adding the
    documents (not counted: the other samplers get the documents as arrays)."""
    start, cpu = time.perf_counter(), time.process_time()
    mdl = peers.tomotopy_lda(X, K, seed, alpha / K)
    added = (time.perf_counter() - start, time.process_time() - cpu)
    peers.tomotopy_train(mdl, sweeps, workers)
    return peers.tomotopy_counts(mdl, K, X.shape[1]), added


def sampler(name: str, X, K: int, sweeps: int, seed: int, alpha: float):
    """A call of sampler ``name`` at the total prior ``alpha``: (counts, (wall, CPU)
    seconds not counted)."""
    if name == "plain":
        return lambda: (run_plain(X, K, sweeps, seed, alpha), (0.0, 0.0))
    n = int(name.split()[1])
    if name.startswith("lsdask"):
        return lambda: (run_lsdask(X, K, sweeps, seed, n, alpha), (0.0, 0.0))
    return lambda: run_tomotopy(X, K, sweeps, seed, n, alpha)


def measure(data: corpora.CorpusData, K: int, sweeps: int, seed: int, alpha: float = ALPHA) -> dict:
    runs = {}
    for name in SAMPLERS:
        call = sampler(name, data.X_train, K, sweeps, seed, alpha)
        (counts, not_counted), wall, cpu = timed(call)
        runs[name] = {
            "wall_per_sweep": (wall - not_counted[0]) / sweeps,
            "cpu_per_sweep": (cpu - not_counted[1]) / sweeps,
            "heldout": score_counts(data.A, data.B, counts),
            "tokens": float(counts.sum()),
        }
        log(
            f"  {name}: {1e3 * runs[name]['wall_per_sweep']:.1f} ms/sweep wall, "
            f"{1e3 * runs[name]['cpu_per_sweep']:.1f} CPU; heldout {runs[name]['heldout']:.4f}"
        )
    return runs


def warm_up(data: corpora.CorpusData) -> None:
    """Compile the numba kernels on a few documents before anything is timed."""
    X = data.X_train[:20]
    run_plain(X, 5, 1, 0)
    run_lsdask(X, 5, 1, 0, 1)


def render(res: dict, quick: bool) -> str:
    sweeps = res["sweeps"]
    lines = header(res, "Collapsed Gibbs samplers" + (" (quick)" if quick else ""))
    lines += [
        f"{sweeps} sweeps from a random start on row 2's training documents of "
        f"`bench_lda.py`, alpha = {ALPHA} in total (rows marked 'alpha per topic': that "
        f"prior per topic), eta = {ETA}. ms per sweep, setup "
        "included (tomotopy's adding of documents excluded); heldout: document completion of "
        "the topic-word counts after the sweeps (nats/token, as row 2).",
        "",
    ]
    rows = []
    for key, runs in res["configs"].items():

        def ms(name: str, runs=runs) -> float:
            return 1e3 * runs[name]["wall_per_sweep"]

        def cpu(name: str, runs=runs) -> float:
            return 1e3 * runs[name]["cpu_per_sweep"]

        rows.append(
            [
                key,
                f"{ms('plain'):.1f}",
                f"{ms('lsdask 1 run'):.1f}",
                f"{ms('lsdask 2 runs'):.1f} ({cpu('lsdask 2 runs'):.1f})",
                f"{ms('tomotopy 1'):.1f}",
                f"{ms('tomotopy 2'):.1f} ({cpu('tomotopy 2'):.1f})",
                f"{ms('plain') / ms('lsdask 1 run'):.2f}x",
                f"{ms('tomotopy 1') / ms('lsdask 1 run'):.2f}x",
                f"{ms('tomotopy 2') / ms('lsdask 2 runs'):.2f}x",
                ", ".join(f"{runs[n]['heldout']:.3f}" for n in SAMPLERS),
            ]
        )
    head = ["corpus, K", "plain (1 thread)", "lsdask 1 run", "lsdask 2 runs (CPU)"]
    head += ["tomotopy 1", "tomotopy 2 (CPU)", "plain / lsdask 1", "tomotopy 1 / lsdask 1"]
    head += ["tomotopy 2 / lsdask 2", "heldout: " + ", ".join(SAMPLERS)]
    lines += table(head, rows)
    large = {k: v for k, v in res["configs"].items() if LARGE in k}
    if large:
        lines += [
            "",
            "Cost at the large prior over the cost at the benchmark's prior (CPU seconds "
            "per sweep, the same sampler, corpus and K, measured in this run):",
            "",
        ]
        rows = []
        for key, runs in large.items():
            small = res["configs"][key.split(LARGE)[0]]
            rows.append(
                [key]
                + [f"{runs[n]['cpu_per_sweep'] / small[n]['cpu_per_sweep']:.2f}x" for n in SAMPLERS]
            )
        lines += table(["corpus, K, prior", *SAMPLERS], rows)
    return "\n".join(lines) + "\n"


LARGE = ", alpha per topic "


def main(argv: list[str] | None = None) -> int:
    ap = options(__doc__, "AP only, K=100, 10 sweeps")
    ap.add_argument("--sweeps", type=int, default=None, help="sweeps per sampler (default 100)")
    ap.add_argument(
        "--per-topic-alpha", type=float, default=None,
        help="also run every configuration at this prior per topic (e.g. 0.5)",
    )  # fmt: skip
    ap.add_argument("--corpora-dir", type=Path, default=corpora.CORPORA_DIR)
    ap.add_argument("--work-dir", type=Path, default=corpora.WORK_DIR)
    ap.add_argument("--corpora", default=None, help="ap,20news (default both; --quick: ap)")
    ap.add_argument("--ks", default=None, help="numbers of topics (default 100,400; --quick: 100)")
    args = ap.parse_args(argv)
    sweeps = args.sweeps or (10 if args.quick else 100)
    names, Ks = (("ap",), (100,)) if args.quick else (("ap", "20news"), (100, 400))
    if args.corpora:
        names = tuple(args.corpora.split(","))
    if args.ks:
        Ks = tuple(int(k) for k in args.ks.split(","))
    stem = "gibbs-quick" if args.quick else "gibbs"
    if args.per_topic_alpha is not None:
        stem += f"-alpha{args.per_topic_alpha:g}"
    run = Run(__file__, stem, args.out, argv, sweeps=sweeps, configs={})
    corpora.ensure_corpora(args.corpora_dir)
    for name in names:
        data = corpora.prepare_corpus(name, args.corpora_dir, args.work_dir, seed=SEED)
        warm_up(data)
        for K in Ks:
            log(f"{name} K={K}: {sweeps} sweeps per sampler")
            run.res["configs"][f"{name}, {K}"] = run.step(
                f"{name} K={K}", lambda data=data, K=K: measure(data, K, sweeps, SEED)
            )
            if args.per_topic_alpha is not None:
                a = args.per_topic_alpha * K
                log(f"{name} K={K}, alpha {args.per_topic_alpha} per topic ({a:g} in total)")
                run.res["configs"][f"{name}, {K}{LARGE}{args.per_topic_alpha:g}"] = run.step(
                    f"{name} K={K} large prior",
                    lambda data=data, K=K, a=a: measure(data, K, sweeps, SEED, a),
                )
    run.finish(lambda res: render(res, args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
