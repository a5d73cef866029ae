"""CPU seconds of ESVI's sub-step parts, in one process (``client="sync"``).

The kernel (``esvi_block_update``), the word factors, the block sums and the
shards' allocation term are timed with ``time.process_time`` around each call
(CPU seconds: they hold on a loaded machine), and every kernel call is listed
with its passes over documents and entries. See README_esvi.md ("Where a
sub-step's time goes at K = 400").

Usage::

    python pipelines/benchmarks/profile_esvi.py --corpus 20news --K 400 --rotations 3 \\
        --gibbs-sweeps 5            # C = K, passes to esvi_tol=0.05, P = 2
    python pipelines/benchmarks/profile_esvi.py --corpus ap --K 400 --topk 100
    python pipelines/benchmarks/profile_esvi.py --corpus 20news --K 64 --gibbs-sweeps 0 --P 1
        # random start, one pass per sub-step (the scaling part's settings)
"""

from __future__ import annotations

import argparse
import collections
import time
from typing import Any

from harness import corpora
from harness.priors import ALPHA, ETA


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="20news", choices=corpora.CORPORA)
    ap.add_argument("--K", type=int, default=400)
    ap.add_argument("--topk", type=int, default=None, help="C (default K)")
    ap.add_argument("--rotations", type=int, default=3)
    ap.add_argument("--gibbs-sweeps", type=int, default=5, help="0: random start, one pass")
    ap.add_argument("--P", type=int, default=2)
    args = ap.parse_args()

    import lsdask.models.esvi_lda as M
    from lsdask import LDA

    data = corpora.load_corpora([args.corpus], corpora.CORPORA_DIR, corpora.WORK_DIR)[args.corpus]
    spent: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    kernel_rows: list[tuple[float, int, int, int]] = []

    def timed(owner: Any, attr: str, label: str) -> None:
        inner = getattr(owner, attr)

        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.process_time()
            out = inner(*a, **k)
            dt = time.process_time() - t
            spent[label] += dt
            calls[label] += 1
            if label == "kernel":
                kernel_rows.append((dt, int(out[1]), a[0].shape[0] - 1, a[1].shape[0]))
            return out

        setattr(owner, attr, wrapper)

    timed(M, "esvi_block_update", "kernel")
    timed(M, "block_word_exps", "word factors")
    timed(M, "block_sums", "block sums (colsum, lgamma)")
    timed(M.ESVILDA, "alloc", "alloc (D x K gammaln)")
    timed(M.ESVILDA, "substep", "sub-steps in all")
    timed(M.ESVILDA, "init_shard", "shards' start")
    start: dict[str, Any] = {}
    if args.gibbs_sweeps:
        start = {"init": "gibbs", "gibbs_sweeps": args.gibbs_sweeps, "esvi_iters": 100,
                 "esvi_tol": 0.05}  # fmt: skip
    lda = LDA(
        args.K, alpha=ALPHA, eta=ETA, client="sync", random_state=0, tol=0, algorithm="esvi",
        n_blocks=args.P, n_laps=args.rotations, topk=args.topk or args.K, **start,
    )  # fmt: skip
    t = time.process_time()
    lda.fit(data.train_path)
    print(f"ESVI {args.corpus} K={args.K} C={args.topk or args.K} P={args.P}: fit CPU "
          f"{time.process_time() - t:.1f} s, {args.rotations} rotations")  # fmt: skip
    for label in sorted(spent, key=lambda k: -spent[k]):
        print(f"  {label:30s} {spent[label]:8.2f} s  {calls[label]:3d} calls")
    for dt, passes, docs, entries in kernel_rows:
        per = dt / (passes / max(docs, 1) * max(entries, 1)) * 1e6
        print(
            f"  kernel {dt:.2f} s: {passes} passes over {docs} documents, {entries} entries, "
            f"{passes / max(docs, 1):.2f} passes a document, {per:.2f} us per entry and pass"
        )


if __name__ == "__main__":
    main()
