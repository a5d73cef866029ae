"""Scale benchmark: one memoized-VI lap over millions of documents and patches.

Measured side by side in one run, every fit in a fresh process with a fresh
LocalCluster (so peak memory is that fit's own):

a. ``lsdask.LDA`` K=100, L=8, one full memoized-VI lap on a 2-worker
   LocalCluster over synthetic corpora of 0.5M and 2M documents (V=20,000,
   100 true topics, 120 tokens per document on average, row groups of 1,000
   documents = batches): documents/s, peak RSS of every worker and of the
   driver, and the growth of the peaks from 0.5M to 2M (target <= 10%);
b. the same lap on the 0.5M corpus with 1 worker: throughput of 2 workers
   over 1 (target >= 1.7x);
c. ``lsdask.GaussianMixture`` (zero-mean) K=200, L=4, one memoized-VI lap over
   10M synthetic 64-dimensional patches (Zarr chunks of 36,816 rows):
   seconds, patches/s, peak RSS per worker.

The data are made once (:mod:`harness.synthetic`) and cached under
``data/bench_scale/``.

A lap is timed by the estimator's own ``time_trace_`` (the first memoized
lap visits every batch once; the trace starts after the cluster started and
the model was initialized). The per-batch memo lives on disk
(``checkpoint_dir``) unless ``--memo memory``: an LDA batch's memo grows with
K and the batch's vocabulary, and thousands of batches held in the driver
need far more memory than the data.

Usage::

    python pipelines/benchmarks/bench_scale.py --quick        # smoke run, < 2 min
    python pipelines/benchmarks/bench_scale.py --scale 0.01   # all sizes x 0.01
    python pipelines/benchmarks/bench_scale.py                # full run (see README_scale.md)

Writes ``pipelines/benchmarks/results/scale.md`` and ``scale.json`` (the
quick and scaled runs write ``scale-quick.*`` and ``scale-x<F>.*``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from harness import REPO, cluster, synthetic
from harness.memory import max_rss_kib, mib, peak_rss_kib, rss_now_kib
from harness.report import check, header, step_times, table
from harness.run import Run, log, options


# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """Sizes of the three measurements; ``FULL`` and ``QUICK`` below."""

    name: str
    # (a), (b): LDA
    lda_docs: tuple[int, int]  # the small and the large corpus
    vocab_size: int
    true_topics: int
    mean_doc_length: float
    docs_per_row_group: int
    docs_per_file: int
    lda_K: int
    lda_L: int
    lda_init: str
    # (c): patches
    n_patches: int
    patch_dim: int
    true_components: int
    chunk_rows: int
    patch_K: int
    patch_L: int
    patch_init: str
    n_workers: int = 2
    seed: int = 0
    rss_target: float = 1.10
    speedup_target: float = 1.7


FULL = Config(
    name="full",
    lda_docs=(500_000, 2_000_000),
    vocab_size=20_000,
    true_topics=100,
    mean_doc_length=120,
    docs_per_row_group=1000,
    docs_per_file=50_000,
    lda_K=100,
    lda_L=8,
    lda_init="kmeans++",
    n_patches=10_000_000,
    patch_dim=64,
    true_components=200,
    chunk_rows=36_816,
    patch_K=200,
    patch_L=4,
    # k-means++ under the Burg divergence costs a lot of driver time at K=200
    # (README_mixture.md); it is outside the timed lap either way
    patch_init="random",
)

QUICK = Config(
    name="quick",
    lda_docs=(2_000, 8_000),
    vocab_size=2_000,
    true_topics=20,
    mean_doc_length=60,
    docs_per_row_group=250,
    docs_per_file=2_000,
    lda_K=20,
    lda_L=4,
    lda_init="kmeans++",
    n_patches=100_000,
    patch_dim=64,
    true_components=20,
    chunk_rows=10_000,
    patch_K=20,
    patch_L=4,
    patch_init="random",
)


def scaled(cfg: Config, factor: float) -> Config:
    """``cfg`` with every data size times ``factor`` (batch sizes and models kept)."""
    if not 0 < factor <= 1:
        raise ValueError(f"--scale must be in (0, 1]; got {factor}")
    docs = tuple(max(cfg.docs_per_row_group, round(n * factor)) for n in cfg.lda_docs)
    return replace(
        cfg,
        name=f"x{factor:g}",
        lda_docs=docs,  # type: ignore[arg-type]
        n_patches=max(cfg.chunk_rows, round(cfg.n_patches * factor)),
    )


def ensure_corpus(cfg: Config, work_dir: Path, n_docs: int) -> tuple[Path, dict[str, Any]]:
    return synthetic.ensure_corpus(
        work_dir,
        n_docs=n_docs,
        vocab_size=cfg.vocab_size,
        n_topics=cfg.true_topics,
        mean_doc_length=cfg.mean_doc_length,
        docs_per_row_group=cfg.docs_per_row_group,
        docs_per_file=cfg.docs_per_file,
        seed=cfg.seed,
        n_workers=cfg.n_workers,
    )


def ensure_patches(cfg: Config, work_dir: Path) -> tuple[str, dict[str, Any]]:
    return synthetic.ensure_patches(
        work_dir,
        n_patches=cfg.n_patches,
        dim=cfg.patch_dim,
        n_components=cfg.true_components,
        chunk_rows=cfg.chunk_rows,
        seed=cfg.seed,
        n_workers=cfg.n_workers,
    )


# --------------------------------------------------------------------------
# one fit in a fresh process
# --------------------------------------------------------------------------
def warm_up(kind: str, data: str, K: int, L: int) -> float:
    """Load (or compile) the numba kernels of a fit in this process; return the seconds.

    A tiny in-process fit (``client="sync"``) on the first batch of ``data``,
    so that the timed lap does not include loading kernels in fresh workers.
    """
    import lsdask

    t0 = time.perf_counter()
    kw = dict(sparsity=L, n_laps=1, init="random", random_state=0, client="sync", progress=False)
    if kind == "lda":
        from lsdask.io.corpus import Corpus

        corpus = Corpus.open(data)
        X = corpus.batches[0].load().to_csr(corpus.vocab_size)
        lsdask.LDA(K, **kw).fit(X)
    else:
        import zarr

        X = zarr.open_array(data, mode="r")[: max(4 * K, 2000)]
        lsdask.GaussianMixture(K, **kw).fit(X)
    return time.perf_counter() - t0


def child(args: argparse.Namespace) -> None:
    """Start a LocalCluster, run one memo lap, print the measurements as one JSON line."""
    import lsdask

    t0 = time.perf_counter()
    lc, client = cluster.local_cluster(args.workers)
    setup_s = time.perf_counter() - t0
    memo = args.memo_dir
    with lc, client:
        start = client.run(peak_rss_kib)
        warm = client.run(warm_up, args.child, args.data, args.k, args.l)
        common = dict(
            sparsity=args.l,
            n_laps=1,
            init=args.init,
            random_state=0,
            client=client,
            progress=False,
            checkpoint_dir=memo,
        )
        if args.child == "lda":
            from lsdask.io.corpus import Corpus

            corpus = Corpus.open(args.data)
            n_rows, n_tokens = corpus.n_docs, corpus.n_tokens
            est = lsdask.LDA(args.k, **common)
        else:
            import zarr

            n_rows, n_tokens = int(zarr.open_array(args.data, mode="r").shape[0]), None
            est = lsdask.GaussianMixture(args.k, **common)
        t1 = time.perf_counter()
        est.fit(args.data)
        fit_s = time.perf_counter() - t1
        workers = client.run(peak_rss_kib)
        workers_maxrss = client.run(max_rss_kib)
        workers_now = client.run(rss_now_kib)
    lap_s = float(est.time_trace_[-1])
    cluster.emit(
        {
            "kind": args.child,
            "data": args.data,
            "n_workers": args.workers,
            "K": args.k,
            "L": args.l,
            "n_rows": n_rows,
            "n_tokens": n_tokens,
            "n_laps": int(est.n_laps_),
            "cluster_start_s": setup_s,
            "warm_up_s": sorted(warm.values()),
            "fit_wall_s": fit_s,
            "lap_s": lap_s,
            "rows_per_s": n_rows / lap_s,
            "tokens_per_s": None if n_tokens is None else n_tokens / lap_s,
            "worker_peak_kib": sorted(workers.values()),
            "worker_maxrss_kib": sorted(workers_maxrss.values()),
            "worker_start_kib": sorted(start.values()),
            "worker_end_kib": sorted(workers_now.values()),
            "driver_peak_kib": peak_rss_kib(),
            "driver_maxrss_kib": max_rss_kib(),
            "memo_bytes": synthetic.folder_bytes(Path(memo) / "memo") if memo else None,
            "elbo": float(est.elbo_trace_[-1]),
        }
    )


def run_child(
    kind: str, data: str, n_workers: int, K: int, L: int, init: str, memo: str,
    work_dir: Path, max_tree_gib: float,
) -> dict[str, Any]:  # fmt: skip
    """Run :func:`child` in a fresh Python process under the memory guard; return
    its measurements, or why it failed (``"failed"``)."""
    memo_dir = None
    if memo == "disk":
        memo_dir = work_dir / f"memo-{kind}-{os.getpid()}"
        shutil.rmtree(memo_dir, ignore_errors=True)
    cmd = [
        sys.executable, __file__, "--child", kind, "--data", data, "--workers", str(n_workers),
        "--k", str(K), "--l", str(L), "--init", init,
    ]  # fmt: skip
    if memo_dir is not None:
        cmd += ["--memo-dir", str(memo_dir)]
    log(f"{kind}: one memo lap, K={K}, L={L}, {n_workers} worker(s), {Path(data).name}")
    try:
        fresh = cluster.run_fresh(cmd, max_tree_gib)
    finally:
        if memo_dir is not None:
            shutil.rmtree(memo_dir, ignore_errors=True)
    if fresh.result is None:
        log(f"  FAILED ({fresh.failed})")
        return {
            "kind": kind,
            "data": data,
            "n_workers": n_workers,
            "failed": fresh.failed,
            "tree_rss_peak_bytes": fresh.tree_peak_bytes,
            "stderr_tail": fresh.stderr[-4000:],
        }
    res = {**fresh.result, "tree_rss_peak_bytes": fresh.tree_peak_bytes}
    log(
        f"  lap {res['lap_s']:.1f} s ({res['rows_per_s']:,.0f} rows/s), worker peaks "
        f"{[round(k / 1024) for k in res['worker_peak_kib']]} MiB, driver "
        f"{res['driver_peak_kib'] / 1024:.0f} MiB"
    )
    return res


def warm_cache(kind: str, data: str, K: int, L: int) -> None:
    """Compile the numba kernels of a fit once, in a throwaway process (cached on disk).

    Every measured process then only loads them, so no measured peak or time
    includes a compilation (kernels are recompiled whenever their source changes).
    """
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from bench_scale import warm_up; "
        "print(warm_up(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))"
    )
    here = str(Path(__file__).resolve().parent)
    log(f"warming the numba cache for {kind} (K={K}, L={L})")
    proc = subprocess.run(
        [sys.executable, "-c", code, here, kind, data, str(K), str(L)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"warming the {kind} kernels failed:\n{proc.stderr[-4000:]}")


# --------------------------------------------------------------------------
# the run and its report
# --------------------------------------------------------------------------
def run(cfg: Config, work_dir: Path, memo: str, max_tree_gib: float, bench: Run) -> None:
    res, step = bench.res, bench.step
    work_dir.mkdir(parents=True, exist_ok=True)
    small, large = cfg.lda_docs
    small_path, res["corpus_small"] = step(
        "data: small corpus", lambda: ensure_corpus(cfg, work_dir, small)
    )
    large_path, res["corpus_large"] = step(
        "data: large corpus", lambda: ensure_corpus(cfg, work_dir, large)
    )
    store, res["patches"] = step("data: patches", lambda: ensure_patches(cfg, work_dir))

    step("warm numba cache: LDA", lambda: warm_cache("lda", str(small_path), cfg.lda_K, cfg.lda_L))
    step("warm numba cache: GMM", lambda: warm_cache("gmm", store, cfg.patch_K, cfg.patch_L))

    def fit(kind: str, data: Any, n_workers: int) -> dict[str, Any]:
        K, L, init = (
            (cfg.lda_K, cfg.lda_L, cfg.lda_init)
            if kind == "lda"
            else (cfg.patch_K, cfg.patch_L, cfg.patch_init)
        )
        return run_child(kind, str(data), n_workers, K, L, init, memo, work_dir, max_tree_gib)

    res["lda_small_2w"] = step(
        "(a) LDA small, 2 workers", lambda: fit("lda", small_path, cfg.n_workers)
    )
    res["lda_small_1w"] = step("(b) LDA small, 1 worker", lambda: fit("lda", small_path, 1))
    res["lda_large_2w"] = step(
        "(a) LDA large, 2 workers", lambda: fit("lda", large_path, cfg.n_workers)
    )
    res["gmm"] = step("(c) GMM patches", lambda: fit("gmm", store, cfg.n_workers))
    a_s, a_l, b_1 = res["lda_small_2w"], res["lda_large_2w"], res["lda_small_1w"]
    if not (a_s.get("failed") or a_l.get("failed")):
        res["worker_rss_growth"] = max(a_l["worker_peak_kib"]) / max(a_s["worker_peak_kib"])
        res["driver_rss_growth"] = a_l["driver_peak_kib"] / a_s["driver_peak_kib"]
    if not (a_s.get("failed") or b_1.get("failed")):
        res["speedup_2_vs_1"] = a_s["rows_per_s"] / b_1["rows_per_s"]


def _peaks(r: dict[str, Any]) -> str:
    return ", ".join(mib(k) for k in r["worker_peak_kib"])


def _fit_cell(r: dict[str, Any], unit: str) -> str:
    """Lap time, throughput and peaks of one fit, or why it failed."""
    if r.get("failed"):
        return f"failed ({r['failed']})"
    tokens = "" if r["tokens_per_s"] is None else f" ({r['tokens_per_s']:,.0f} tokens/s)"
    return (
        f"{r['lap_s']:.1f} s, {r['rows_per_s']:,.0f} {unit}/s{tokens}; worker peaks "
        f"{_peaks(r)}; driver {mib(r['driver_peak_kib'])}"
    )


def table_rows(res: dict[str, Any], cfg: Config) -> list[list[str]]:
    """The Markdown table: row id, benchmark, measured, target, PASS/FAIL/info."""
    a_s, a_l, b_1, c = res["lda_small_2w"], res["lda_large_2w"], res["lda_small_1w"], res["gmm"]
    n_s, n_l = res["corpus_small"]["n_docs"], res["corpus_large"]["n_docs"]
    lda = f"LDA K={cfg.lda_K}, L={cfg.lda_L}, one MVI lap"
    limit = f"<= {cfg.rss_target:.2f}x (+{(cfg.rss_target - 1) * 100:.0f}%)"
    if "worker_rss_growth" in res:
        growth, dgrowth = res["worker_rss_growth"], res["driver_rss_growth"]
        worker_cell = (
            f"{mib(max(a_s['worker_peak_kib']))} -> {mib(max(a_l['worker_peak_kib']))} = "
            f"{growth:.3f}x"
        )
        driver_cell = (
            f"{mib(a_s['driver_peak_kib'])} -> {mib(a_l['driver_peak_kib'])} = {dgrowth:.3f}x"
        )
        results = [check(growth <= cfg.rss_target), check(dgrowth <= cfg.rss_target)]
    else:
        worker_cell = driver_cell = "not measured: a fit failed"
        results = ["FAIL", "FAIL"]
    if "speedup_2_vs_1" in res:
        speed = res["speedup_2_vs_1"]
        speed_cell = f"{a_s['rows_per_s']:,.0f} / {b_1['rows_per_s']:,.0f} docs/s = {speed:.2f}x"
        speed_result = check(speed >= cfg.speedup_target)
    else:
        speed_cell, speed_result = "not measured: a fit failed", "FAIL"
    n_patches = res["patches"]["n_patches"]
    return [
        ["a1", f"{lda}, {n_s:,} docs, 2 workers", _fit_cell(a_s, "docs"), "report", "info"],
        ["a2", f"{lda}, {n_l:,} docs, 2 workers", _fit_cell(a_l, "docs"), "report", "info"],
        [
            "a3",
            f"peak worker RSS growth, {n_s:,} -> {n_l:,} docs (max over workers, VmHWM)",
            worker_cell,
            limit,
            results[0],
        ],
        ["a4", f"peak driver RSS growth, {n_s:,} -> {n_l:,} docs", driver_cell, limit, results[1]],
        [
            "b",
            f"{lda}, {n_s:,} docs: throughput 2 workers / 1 worker",
            speed_cell,
            f">= {cfg.speedup_target}x",
            speed_result,
        ],
        [
            "c",
            f"GaussianMixture zero-mean K={cfg.patch_K}, L={cfg.patch_L}, one MVI lap, "
            f"{n_patches:,} patches (D={cfg.patch_dim}), 2 workers",
            _fit_cell(c, "patches"),
            "report",
            "info" if not c.get("failed") else "FAIL",
        ],
    ]


def fits_table(res: dict[str, Any]) -> list[str]:
    """Every fit's sizes, times and peaks."""
    batches = {
        "lda_small_2w": res["corpus_small"]["n_batches"],
        "lda_small_1w": res["corpus_small"]["n_batches"],
        "lda_large_2w": res["corpus_large"]["n_batches"],
        "gmm": res["patches"]["n_batches"],
    }
    head = ["fit", "rows", "batches", "workers", "cluster start s", "kernel warm-up s"]
    head += ["fit wall s", "lap s", "rows/s", "worker peak (VmHWM)", "worker ru_maxrss"]
    lines = table([*head, "driver peak", "memo on disk"], [])
    for name, n_batches in batches.items():
        r = res[name]
        if r.get("failed"):
            lines.append(f"| {name} | | {n_batches} | {r['n_workers']} | failed: {r['failed']} |")
            continue
        memo = "-" if r["memo_bytes"] is None else f"{r['memo_bytes'] / 2**20:,.0f} MiB"
        lines.append(
            f"| {name} | {r['n_rows']:,} | {n_batches} | {r['n_workers']} "
            f"| {r['cluster_start_s']:.1f} | {max(r['warm_up_s']):.1f} | {r['fit_wall_s']:.1f} "
            f"| {r['lap_s']:.1f} "
            f"| {r['rows_per_s']:,.0f} | {_peaks(r)} "
            f"| {', '.join(mib(k) for k in r['worker_maxrss_kib'])} "
            f"| {mib(r['driver_peak_kib'])} | {memo} |"
        )
    return lines


def render_markdown(res: dict[str, Any], cfg: Config) -> str:
    lines = header(res, f"lsdask scale benchmark ({cfg.name} run)")
    lines += [
        "Every fit runs in a fresh process with a fresh LocalCluster (processes, 1 thread "
        "each) whose workers first load the numba kernels (a tiny in-process fit); a lap is "
        "the estimator's `time_trace_` after one memoized lap (cluster start-up, kernel "
        f"loading and initialization excluded); memo: {res['memo']}. Peak RSS is `VmHWM` "
        "of each process (its `ru_maxrss` is shown too).",
        "",
    ]
    lines += table(["#", "Benchmark", "Measured", "Target", "Result"], table_rows(res, cfg))
    lines += ["", "## Fits", "", *fits_table(res)]
    data = []
    for key in ("corpus_small", "corpus_large", "patches"):
        d = res[key]
        made = "cached" if d["generate_s"] is None else f"made in {d['generate_s']:.1f} s"
        data.append(f"`{Path(d['path']).name}` ({d['bytes'] / 2**20:,.0f} MiB, {made})")
    lines += ["", "Data: " + "; ".join(data) + ".", "", step_times(res), ""]
    lines += ["Raw numbers: `" + res["json_name"] + "`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__, "tiny sizes, < 2 minutes")
    parser.add_argument(
        "--scale", type=float, default=None, help="multiply every data size by F (0 < F <= 1)"
    )
    parser.add_argument(
        "--memo",
        choices=("disk", "memory"),
        default="disk",
        help="where the per-batch memo lives during the lap (default disk: checkpoint_dir)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=REPO / "data" / "bench_scale",
        help="cached corpora and patches, temporary memo folders",
    )
    parser.add_argument(
        "--max-gib",
        type=float,
        default=None,
        help="kill a fit whose driver + workers use more memory than this (default: half the "
        "machine's memory); the fit is then reported as failed",
    )
    # internal: one fit in a fresh process
    parser.add_argument("--child", choices=("lda", "gmm"), help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--k", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--l", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--init", help=argparse.SUPPRESS)
    parser.add_argument("--memo-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if args.quick and args.scale is not None:
        parser.error("give --quick or --scale, not both")
    cfg = QUICK if args.quick else FULL
    if args.scale is not None and args.scale != 1:
        cfg = scaled(FULL, args.scale)
    total_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    max_gib = args.max_gib if args.max_gib is not None else total_gib / 2
    stem = "scale" if cfg.name == "full" else f"scale-{cfg.name}"
    record = {"config": asdict(cfg), "memo": args.memo, "max_tree_gib": max_gib}
    bench = Run(__file__, stem, args.out, argv, **record)
    run(cfg, args.work_dir, args.memo, max_gib, bench)
    bench.finish(lambda res: render_markdown(res, cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
