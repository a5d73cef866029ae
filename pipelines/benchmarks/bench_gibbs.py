"""The collapsed Gibbs sampler of ``LDA(init="gibbs")`` against a plain one and tomotopy's.

On row 2's training documents of ``bench_lda.py`` (AP and 20 Newsgroups,
K = 100 and 400, alpha = 0.5 in total, eta = 0.1), each sampler runs the
same number of sweeps from a random start, side by side in one run:

- ``plain``: the textbook sweep, every token's weights over all K topics
  (numba, one thread; lsdask's sampler before git 87f3214), the reference;
- ``lsdask 1 run``: ``gibbs_sample(..., parts=1)``, the exact two-bucket
  sampler in one thread;
- ``lsdask 2 runs``: ``parts=2``, the library's default (two halves of the
  documents in two threads);
- ``tomotopy 1`` / ``tomotopy 2``: ``LDAModel.train(n, workers=1 or 2)``.

It reports wall and CPU seconds per sweep (setup included, spread over the
sweeps), the ratios of interest, and the heldout score (App. E document
completion, as row 2) of each sampler's topic-word counts after the sweeps,
so that a faster sampler that mixes worse would show.

Usage::

    python pipelines/benchmarks/bench_gibbs.py [--quick] [--sweeps 100]

Writes ``results/gibbs.md`` and ``results/gibbs.json`` (``gibbs-quick.*``
with ``--quick``: AP only, K=100, 10 sweeps).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import bench_lda as bl
import numba
import numpy as np
from bench_machine import machine_info
from diag_lda_optimum import heldout

from lsdask.models.lda_gibbs import gibbs_sample, random_start


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


def run_plain(X, K: int, sweeps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    doc_ptr, words, z, ndk, nwk, nk = random_start(X, K, rng)  # the same start as gibbs_sample's
    for _ in range(sweeps):
        plain_sweep(doc_ptr, words, z, ndk, nwk, nk, bl.ALPHA / K, bl.ETA, rng.random(z.shape[0]))
    return nwk.T.astype(np.float64)


def run_lsdask(X, K: int, sweeps: int, seed: int, parts: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return gibbs_sample(X, K, bl.ALPHA, bl.ETA, sweeps, rng, False, parts).topic_word


def run_tomotopy(X, K: int, sweeps: int, seed: int, workers: int) -> tuple[np.ndarray, float]:
    """Topic-word counts after ``sweeps``, and the seconds of adding the documents
    (not counted: the other samplers get the documents as arrays)."""
    start = time.perf_counter()
    mdl = bl.tomotopy_lda(X, K, seed)
    added = time.perf_counter() - start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "training result may differ ... workers != 1"
        mdl.train(sweeps, workers=workers)
    lam = bl.tomotopy_pseudo_counts(mdl, K, X.shape[1], {})
    return np.maximum(lam - bl.ETA, 0.0), added


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


SAMPLERS = ("plain", "lsdask 1 run", "lsdask 2 runs", "tomotopy 1", "tomotopy 2")


def measure(data: bl.CorpusData, K: int, sweeps: int, seed: int) -> dict:
    X = data.X_train
    runs = {}
    for name in SAMPLERS:
        if name == "plain":
            fn = lambda: (run_plain(X, K, sweeps, seed), 0.0)  # noqa: E731
        elif name.startswith("lsdask"):
            parts = int(name.split()[1])
            fn = lambda parts=parts: (run_lsdask(X, K, sweeps, seed, parts), 0.0)  # noqa: E731
        else:
            workers = int(name.split()[1])
            fn = lambda workers=workers: run_tomotopy(X, K, sweeps, seed, workers)  # noqa: E731
        (counts, not_counted), wall, cpu = timed(fn)
        runs[name] = {
            "wall_per_sweep": (wall - not_counted) / sweeps,
            "cpu_per_sweep": (cpu - not_counted) / sweeps,
            "heldout": heldout(data, counts),
            "tokens": float(counts.sum()),
        }
        bl.log(
            f"  {name}: {1e3 * runs[name]['wall_per_sweep']:.1f} ms/sweep wall, "
            f"{1e3 * runs[name]['cpu_per_sweep']:.1f} CPU; heldout {runs[name]['heldout']:.4f}"
        )
    return runs


def warm_up(data: bl.CorpusData) -> None:
    """Compile the numba kernels on a few documents before anything is timed."""
    X = data.X_train[:20]
    run_plain(X, 5, 1, 0)
    run_lsdask(X, 5, 1, 0, 1)


def render(res: dict, args: argparse.Namespace) -> str:
    info = res["machine"]
    lines = [
        "# Collapsed Gibbs samplers" + (" (quick)" if args.quick else ""),
        "",
        f"Command: `python pipelines/benchmarks/bench_gibbs.py"
        f"{' --quick' if args.quick else ''} --sweeps {args.sweeps}`  ",
        f"Started {res['started']}; {res['seconds'] / 60:.1f} min; load average at start "
        f"{res['load'][0]}, at end {res['load'][1]}; git {info.get('git_commit')}; "
        f"{info.get('cpu')}, {info.get('cores_usable')} cores.",
        "",
        f"{args.sweeps} sweeps from a random start on row 2's training documents of "
        f"`bench_lda.py`, alpha = {bl.ALPHA} in total, eta = {bl.ETA}. ms per sweep, setup "
        "included (tomotopy's adding of documents excluded); heldout: document completion of "
        "the topic-word counts after the sweeps (nats/token, as row 2).",
        "",
        "| corpus, K | plain (1 thread) | lsdask 1 run | lsdask 2 runs (CPU) | tomotopy 1 "
        "| tomotopy 2 (CPU) | plain / lsdask 1 | tomotopy 1 / lsdask 1 | tomotopy 2 / lsdask 2 "
        "| heldout: plain, lsdask 1, lsdask 2, tomotopy 1, tomotopy 2 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, runs in res["configs"].items():

        def ms(name: str, runs=runs) -> float:
            return 1e3 * runs[name]["wall_per_sweep"]

        def cpu(name: str, runs=runs) -> float:
            return 1e3 * runs[name]["cpu_per_sweep"]

        scores = ", ".join(f"{runs[n]['heldout']:.3f}" for n in SAMPLERS)
        lines.append(
            f"| {key} | {ms('plain'):.1f} | {ms('lsdask 1 run'):.1f} | "
            f"{ms('lsdask 2 runs'):.1f} ({cpu('lsdask 2 runs'):.1f}) | {ms('tomotopy 1'):.1f} | "
            f"{ms('tomotopy 2'):.1f} ({cpu('tomotopy 2'):.1f}) | "
            f"{ms('plain') / ms('lsdask 1 run'):.2f}x | "
            f"{ms('tomotopy 1') / ms('lsdask 1 run'):.2f}x | "
            f"{ms('tomotopy 2') / ms('lsdask 2 runs'):.2f}x | {scores} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="AP only, K=100, 10 sweeps")
    ap.add_argument("--sweeps", type=int, default=None, help="sweeps per sampler (default 100)")
    ap.add_argument("--corpora-dir", type=Path, default=bl.REPO / "data/corpora")
    ap.add_argument("--work-dir", type=Path, default=bl.REPO / "data/lda_bench")
    args = ap.parse_args(argv)
    args.sweeps = args.sweeps or (10 if args.quick else 100)
    corpora, Ks = (("ap",), (100,)) if args.quick else (("ap", "20news"), (100, 400))
    started, t0, load0 = time.strftime("%Y-%m-%d %H:%M:%S"), time.perf_counter(), bl.load_avg()
    bl.ensure_corpora(args.corpora_dir)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    res: dict = {"started": started, "configs": {}}
    for corpus in corpora:
        data = bl.prepare_corpus(bl.FULL, corpus, args.corpora_dir, args.work_dir)
        warm_up(data)
        for K in Ks:
            bl.log(f"{corpus} K={K}: {args.sweeps} sweeps per sampler")
            res["configs"][f"{corpus}, {K}"] = measure(data, K, args.sweeps, bl.FULL.seed)
    res["seconds"] = time.perf_counter() - t0
    res["load"] = [load0[0], bl.load_avg()[0]]
    res["machine"] = machine_info({"lsdask": "lsdask", "tomotopy": "tomotopy", "numba": "numba"})
    name = "gibbs-quick" if args.quick else "gibbs"
    (bl.RESULTS_DIR / f"{name}.json").write_text(json.dumps(res, indent=1, default=float))
    text = render(res, args)
    (bl.RESULTS_DIR / f"{name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
