"""The memory part of ``bench_esvi.py`` (issue 26): a model beyond one process's memory.

A synthetic corpus from the scale benchmark's generator
(``harness.synthetic.ensure_corpus``) with a vocabulary of V = 500,000 words
is fitted with K = 1,000 topics twice, each time on a fresh cluster whose
two workers run under Dask's ``memory_limit="3GiB"`` (the nanny kills a
worker at 95% of it; spilling and pausing are turned off, so a worker's
memory is what it holds) and with a driver process limited to 3 GiB of
address space (``RLIMIT_AS``):

1. memoized LDA (``LDA(1000, algorithm="memo", n_laps=2)``, lsdask's defaults
   otherwise: the Gibbs start; and with ``init="random"``, which starts from
   random documents and goes straight to the laps): how it fails, or that it
   does not;
2. ESVI with P = 2 blocks, C = ``--memory-topk`` topics kept per token,
   2 rotations, with float32 blocks (``esvi-float32``) and float64 ones
   (``esvi-float64``): every process's peak resident memory, and each
   worker's stored block in bytes against the whole model's.

Each run has its own processes: a *cluster* process (the scheduler and two
nannies, each starting one worker process) and a *driver* process that runs
the fit against the cluster's address. The parent polls every process's
``VmHWM`` (its peak resident set, from ``/proc/<pid>/status``) twice a
second; the children report their own peaks at the end where they still
live.

Usage (from ``bench_esvi.py --parts memory``; the children are this file run
with ``--child cluster`` or ``--child driver``).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GIB = 2**30
TAG = "MEMORY_JSON "
#: Dask's memory settings of the workers: the limit and its kill fraction kept,
#: spilling to disk and pausing off (a block spilled to disk is not held)
WORKER_ENV = {
    "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "False",
    "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL": "False",
    "DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE": "False",
    "DASK_DISTRIBUTED__WORKER__MEMORY__TERMINATE": "0.95",
}


def emit(obj: dict[str, Any]) -> None:
    print(TAG + json.dumps(obj), flush=True)


def vm_hwm_bytes(pid: int | str = "self") -> int:
    """Peak resident set (``VmHWM``) of a process, in bytes; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# ---------------------------------------------------------------------------
# the children
# ---------------------------------------------------------------------------
def cluster_child(limit: str) -> None:
    """A LocalCluster of 2 single-thread worker processes under ``memory_limit``;
    prints its address and the workers' process ids, then serves until killed."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, memory_limit=limit,
        dashboard_address=":0",
    )  # fmt: skip
    client = Client(cluster)
    pids = client.run(os.getpid)
    emit({"address": cluster.scheduler_address, "workers": pids})
    client.close()
    while True:
        time.sleep(3600)


def _worker_report(dask_worker: Any, eta: float = 0.1) -> dict[str, Any]:
    """What a worker holds: its peak memory and its parameter blocks' bytes and
    non-zero entries (``lambda != eta`` in the block's own element type)."""
    import numpy as np

    blocks: list[dict[str, Any]] = []
    keys: dict[int, int] = {}  # keys per block object: one object may sit under two keys
    for value in list(dask_worker.data.values()):
        lam = getattr(value, "lam", None)
        if isinstance(lam, np.ndarray) and hasattr(value, "words"):
            keys[id(value)] = keys.get(id(value), 0) + 1
            if keys[id(value)] > 1:
                continue
            blocks.append({
                "index": int(value.index), "words": int(value.words.size),
                "nbytes": int(value.nbytes), "lam_nbytes": int(lam.nbytes),
                "dtype": str(lam.dtype),
                "nonzero": int(np.count_nonzero(lam != lam.dtype.type(eta))),
                "object": id(value),
            })  # fmt: skip
    for b in blocks:
        b["keys"] = keys[b.pop("object")]
    return {"pid": os.getpid(), "vm_hwm": vm_hwm_bytes(), "blocks": blocks,
            "memory_limit": dask_worker.memory_manager.memory_limit}  # fmt: skip


def driver_child(address: str, corpus: str, which: str, K: int, topk: int, limit: int) -> None:
    """Fit ``which`` (``memo-<init>`` or ``esvi``) under ``RLIMIT_AS`` (set by the
    parent); print what happened."""
    import traceback

    from distributed import Client

    from lsdask import LDA

    out: dict[str, Any] = {"which": which, "rlimit_as": resource.getrlimit(resource.RLIMIT_AS)[0]}
    client = Client(address)
    t0 = time.perf_counter()
    try:
        if which.startswith("memo"):
            init = which.split("-", 1)[1]
            lda = LDA(
                K, algorithm="memo", n_laps=2, tol=0, random_state=0, init=init, client=client
            )
        else:
            lda = LDA(
                K, algorithm="esvi", n_blocks=2, topk=topk, n_laps=2, tol=0, random_state=0,
                esvi_dtype=which.split("-", 1)[1], client=client,
            )  # fmt: skip
        lda.fit(corpus)
        out["outcome"] = "completed"
        out["elbo_trace"] = [float(x) for x in lda.elbo_trace_]
        out["time_trace_s"] = [float(x) for x in lda.time_trace_]
        out["driver_holds_components"] = "components_" in vars(lda)
    except BaseException as exc:
        out["outcome"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        out["traceback"] = traceback.format_exc()[-3000:]
    out["fit_s"] = time.perf_counter() - t0
    out["driver_vm_hwm"] = vm_hwm_bytes()
    try:
        out["workers"] = client.run(_worker_report)
    except BaseException as exc:
        out["workers_error"] = f"{type(exc).__name__}: {exc}"
    emit(out)
    client.close()


# ---------------------------------------------------------------------------
# the parent
# ---------------------------------------------------------------------------
def _tagged(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(ln[len(TAG) :]) for ln in lines if ln.startswith(TAG)]


def _kill(proc: Any) -> None:
    """Kill a child (a ``subprocess.Popen``) and its descendants, if it still runs."""
    import psutil
    from harness.cluster import kill_tree

    try:
        kill_tree(psutil.Process(proc.pid))
    except psutil.Error:  # already gone
        return


def one_run(
    which: str, corpus: str, K: int, topk: int, limit_gib: float, timeout_s: float, tmp: Path
) -> dict[str, Any]:
    """One fit on a fresh cluster; every process's peak resident memory."""
    import psutil

    here = str(Path(__file__).resolve())
    env = {**os.environ, **WORKER_ENV}
    limit = int(limit_gib * GIB)
    c_out = tmp / f"{which}-cluster.out"
    d_out = tmp / f"{which}-driver.out"
    with open(c_out, "w") as co, open(tmp / f"{which}-cluster.err", "w") as ce:
        cluster = subprocess.Popen(
            [sys.executable, here, "--child", "cluster", "--limit", f"{limit_gib}GiB"],
            stdout=co, stderr=ce, env=env,
        )  # fmt: skip
    peaks: dict[int, int] = {}
    roles: dict[int, str] = {cluster.pid: "cluster (scheduler, nannies)"}
    driver = None
    t0 = time.perf_counter()
    try:
        while not _tagged(c_out):
            if cluster.poll() is not None or time.perf_counter() - t0 > 300:
                raise RuntimeError(f"the cluster did not start: {(tmp / f'{which}-cluster.err')}")
            time.sleep(0.5)
        info = _tagged(c_out)[0]
        for addr, pid in info["workers"].items():
            roles[int(pid)] = f"worker {addr}"

        def set_limit() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        with open(d_out, "w") as do, open(tmp / f"{which}-driver.err", "w") as de:
            driver = subprocess.Popen(
                [sys.executable, here, "--child", "driver", "--address", info["address"],
                 "--corpus", corpus, "--which", which, "--K", str(K), "--topk", str(topk),
                 "--limit-bytes", str(limit)],
                stdout=do, stderr=de, env=env, preexec_fn=set_limit,
            )  # fmt: skip
        roles[driver.pid] = "driver"
        t_fit = time.perf_counter()
        timed_out = False
        while driver.poll() is None:
            for p in [psutil.Process(cluster.pid), *psutil.Process(cluster.pid).children(True)]:
                if p.pid not in roles:  # a worker restarted by its nanny
                    roles[p.pid] = "worker (restarted)" if "spawn" in " ".join(
                        p.cmdline()) else f"other: {' '.join(p.cmdline())[:60]}"  # fmt: skip
            for pid in roles:
                peaks[pid] = max(peaks.get(pid, 0), vm_hwm_bytes(pid))
            if time.perf_counter() - t_fit > timeout_s:
                timed_out = True
                _kill(driver)
                break
            time.sleep(0.5)
        wall = time.perf_counter() - t_fit
        for pid in roles:
            peaks[pid] = max(peaks.get(pid, 0), vm_hwm_bytes(pid))
    finally:
        if driver is not None and driver.poll() is None:
            _kill(driver)
        _kill(cluster)
    reported = _tagged(d_out)
    result = reported[-1] if reported else {"outcome": "the driver printed nothing"}
    if timed_out:
        result["outcome"] = f"stopped after {timeout_s:.0f} s (the run's time limit)"
    if not reported:
        err = (tmp / f"{which}-driver.err").read_text()[-3000:]
        result["stderr_tail"] = err
    result["wall_s"] = wall
    result["driver_returncode"] = driver.returncode if driver is not None else None
    cluster_err = (tmp / f"{which}-cluster.err").read_text()
    result["worker_kills"] = [
        ln.strip()[:300] for ln in cluster_err.splitlines()
        if "exceeded" in ln or "Restarting worker" in ln or "killed" in ln.lower()
    ][:10]  # fmt: skip
    result["peaks"] = [
        {"pid": pid, "role": roles[pid], "vm_hwm": peaks.get(pid, 0)} for pid in roles
    ]
    return result


def predict(info: dict[str, Any], K: int, V: int, P: int, C: int) -> dict[str, Any]:
    """The memory each process needs, on paper (bytes)."""
    entries, docs = info["n_entries"], info["n_docs"]
    dense64 = 8 * K * V
    block32 = 4 * K * V / P
    entry = 4 + 8 + 12 * C + 8  # word, count, C (value, topic), rest
    shard = entries / P * entry + 2 * 8 * K * docs / P  # entries; n_d and its scratch
    return {
        "memo_driver": {
            "formula": "8 K V (one dense float64 copy of lambda, the lap's re-sum) + runtime",
            "bytes": dense64,
        },
        "esvi_block": {"formula": "4 K V / P (float32)", "bytes": block32},
        "esvi_worker": {
            "formula": "2 x 4 K V / P (two blocks while they cross) + entries/P x "
            f"(24 + 12 C) + 16 K D / P (n_d, scratch) + runtime; C={C}",
            "bytes": 2 * block32 + shard,
        },
        "esvi_driver": {
            "formula": "O(V + K P): the partition and the totals + runtime",
            "bytes": 8 * V * 3 + 8 * K * P,
        },
    }


def corpus_info(path: Path) -> dict[str, Any]:
    """Documents, tokens, entries (distinct words per document), row groups, lengths."""
    import numpy as np

    from lsdask.io.corpus import Corpus

    corpus = Corpus.open(path)
    lengths, entries, used = [], 0, set()
    for batch in corpus.batches:
        X = batch.load().to_csr(corpus.vocab_size)
        lengths.append(np.asarray(X.sum(axis=1)).ravel())
        entries += X.nnz
        used.update(np.unique(X.indices).tolist())
    lengths_a = np.concatenate(lengths)
    return {
        "path": str(path), "n_docs": int(corpus.n_docs), "n_tokens": float(corpus.n_tokens),
        "vocab_size": int(corpus.vocab_size), "row_groups": len(corpus.batches),
        "n_entries": int(entries), "words_used": len(used),
        "length_mean": float(lengths_a.mean()), "length_median": float(np.median(lengths_a)),
        "length_max": float(lengths_a.max()),
    }  # fmt: skip


def memory_part(args: Any, tmp_root: Path) -> dict[str, Any]:
    """Make (or reuse) the corpus, predict, then run memo and ESVI under the limits."""
    from harness import corpora, synthetic

    path, _ = synthetic.ensure_corpus(
        corpora.WORK_DIR, n_docs=args.memory_docs, vocab_size=args.memory_vocab,
        n_topics=100, mean_doc_length=args.memory_doc_length,
        docs_per_row_group=args.memory_docs_per_row_group, docs_per_file=5000, seed=0,
        n_workers=2,
    )  # fmt: skip
    info = corpus_info(path)
    K, P, C = args.memory_K, 2, args.memory_topk
    res: dict[str, Any] = {
        "K": K, "V": info["vocab_size"], "P": P, "C": C, "limit_gib": args.memory_limit_gib,
        "corpus": info, "generator": {"true_topics": 100, "alpha": 0.1, "eta": 0.01,
                                      "mean_doc_length": args.memory_doc_length},
        "prediction": predict(info, K, info["vocab_size"], P, C),
    }  # fmt: skip
    tmp_root.mkdir(parents=True, exist_ok=True)
    runs = args.memory_runs.split(",")
    res["runs"] = runs
    for which in runs:
        res[which] = one_run(
            which, str(path), K, C, args.memory_limit_gib, args.memory_timeout_s, tmp_root
        )
    return res


def _gib(b: float) -> str:
    return f"{b / GIB:.2f} GiB"


def render_memory(m: dict[str, Any]) -> list[str]:
    """The memory part's section of the report."""
    info, limit = m["corpus"], m["limit_gib"] * GIB
    K, V, P, C = m["K"], m["V"], m["P"], m["C"]
    lines = [
        f"## Beyond one process's memory: K={K:,}, V={V:,}, limits {m['limit_gib']:g} GiB",
        "",
        f"Synthetic corpus (`harness.synthetic.ensure_corpus`, {m['generator']['true_topics']} "
        f"true topics, alpha {m['generator']['alpha']}, eta {m['generator']['eta']}): "
        f"{info['n_docs']:,} documents, {info['n_tokens']:,.0f} tokens (length mean "
        f"{info['length_mean']:.1f}, median {info['length_median']:.0f}, max "
        f"{info['length_max']:.0f}), {info['row_groups']} row groups, {info['n_entries']:,} "
        f"entries (distinct words per document), {info['words_used']:,} of the {V:,} words "
        "used.",
        "",
        "Prediction:",
        "",
    ]
    for name, p in m["prediction"].items():
        lines.append(f"- {name}: {p['formula']} = {_gib(p['bytes'])}")
    lines.append("")
    for which in m.get("runs", ["memo", "esvi"]):
        r = m.get(which)
        if not r:
            continue
        kind, variant = which.split("-", 1)
        title = (
            f"ESVI P={P}, C={C}, {variant} blocks, 2 rotations" if kind == "esvi"
            else f"memoized LDA, init={variant!r}, 2 laps"
        )  # fmt: skip
        lines += [f"### {title}", "", f"- outcome: {r['outcome']} (fit {r.get('fit_s', 0):.0f} s)"]
        if r.get("outcome", "").startswith(("MemoryError", "ClusterError")) and r.get("traceback"):
            frames = [ln.strip() for ln in r["traceback"].splitlines() if ln.strip().startswith(
                "File") and "lsdask" in ln]  # fmt: skip
            if frames:
                lines.append(f"- where: `{frames[-1]}`")
        if kind == "esvi" and r.get("time_trace_s"):
            t = r["time_trace_s"]
            lines.append(f"- the rotations took {t[-1]:.0f} s of the fit's {r['fit_s']:.0f} s "
                         "(the rest: loading the shards, the random start)")  # fmt: skip
        if r.get("worker_kills"):
            lines.append(f"- nanny: {r['worker_kills'][0]}")
        if r.get("elbo_trace"):
            lines.append(f"- ELBO trace (per lap for ESVI, per update for memo): {r['elbo_trace']}")
        lines += ["", "| process | peak RSS (VmHWM) | under the limit |", "|---|---|---|"]
        killed = " ".join(r.get("worker_kills", []))
        for p in r["peaks"]:
            if p["role"].startswith("other"):
                continue
            if f"pid={p['pid']})" in killed:  # its last VmHWM read before the kill
                lines.append(f"| {p['role']} | > {_gib(0.95 * limit)} (last read "
                             f"{_gib(p['vm_hwm'])}) | no: killed by its nanny |")  # fmt: skip
                continue
            lines.append(f"| {p['role']} | {_gib(p['vm_hwm'])} | "
                         f"{'yes' if p['vm_hwm'] < limit else 'no'} |")  # fmt: skip
        lines.append(
            f"\n(A worker is killed by its nanny at 95% of its limit, "
            f"{_gib(0.95 * limit)}; the driver's limit is on its address space.)"
        )
        blocks = [
            {**b, "worker": w} for w, rep in (r.get("workers") or {}).items() for b in rep["blocks"]
        ]
        if blocks:
            whole = sum(b["nbytes"] for b in blocks)
            lines += [
                "",
                "| worker | block | words | bytes | share of the whole | within 1/P + 10% "
                "| non-zero entries |",
                "|---|---|---|---|---|---|---|",
            ]
            for b in sorted(blocks, key=lambda b: b["index"]):
                share = b["nbytes"] / whole
                lines.append(
                    f"| {b['worker']} | {b['index']} ({b['dtype']}) | {b['words']:,} | "
                    f"{b['nbytes']:,} | {share:.4f} | "
                    f"{'yes' if share <= 1 / P + 0.10 else 'no'} | {b['nonzero']:,} |"
                )
            nnz = sum(b["nonzero"] for b in blocks)
            lines.append(f"\nNon-zero topic-word entries (lambda != eta) after the fit: {nnz:,} "
                         f"of K V = {K * V:,}.")  # fmt: skip
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--child", choices=("cluster", "driver"), required=True)
    parser.add_argument("--limit", default="3GiB")
    parser.add_argument("--address")
    parser.add_argument("--corpus")
    parser.add_argument("--which")
    parser.add_argument("--K", type=int, default=1000)
    parser.add_argument("--topk", type=int, default=8)
    parser.add_argument("--limit-bytes", type=int, default=3 * GIB)
    args = parser.parse_args(argv)
    if args.child == "cluster":
        cluster_child(args.limit)
    else:
        driver_child(args.address, args.corpus, args.which, args.K, args.topk, args.limit_bytes)


if __name__ == "__main__":
    main()
