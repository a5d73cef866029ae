"""Make a large synthetic LDA corpus with known topics, in parallel with Dask.

The documents follow the generative process of latent Dirichlet allocation
(lsparse paper, Sec. 5), so the answer is known:

* ``K`` topics ``phi_k ~ Dir(eta)`` over ``V`` words, drawn once from a seeded
  generator and saved as ``true_topics.npy`` (float64, ``(K, V)``);
* per document ``d``: a length ``N_d = 1 + NegBin(r, p)`` with mean
  ``mean_doc_length`` (overdispersed like real document lengths, at least one
  token), topic weights ``pi_d ~ Dir(alpha)`` (``alpha`` per topic), topic
  counts ``n_dk ~ Mult(N_d, pi_d)``, and ``n_dk`` words drawn from ``phi_k``.

The output is an lsdask Parquet corpus (:mod:`lsdask.io.corpus`)::

    out_dir/
        manifest.json  vocab.txt (w00000, w00001, ...)  true_topics.npy
        parts/part-00000.parquet ...   # docs_per_file documents each

Each Parquet file is written by its own task (``client.submit``) seeded from
``(seed, file index)``, so the corpus does not depend on the number of
workers or the order in which tasks run; a task holds one row group of
documents at a time (memory bounded by ``docs_per_row_group``), generates it
vectorized (no per-token Python loop) and renames its finished file into
place. The driver first creates an empty corpus (vocabulary and manifest),
lets the tasks fill ``parts/``, then rebuilds the batch list from the
Parquet footers with ``Corpus.open(..., rescan=True)``. Everything happens in
a hidden temporary sibling of ``out_dir`` that is renamed to ``out_dir`` at
the end, so ``out_dir`` is either complete or absent.

Example::

    python datasets/make_synthetic_corpus.py --out data/synthetic/lda-2M
    python datasets/make_synthetic_corpus.py --out data/tiny --n-docs 5000 \\
        --vocab-size 1000 --n-topics 20 --sync
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

try:
    from lsdask.io.atomic import remove_tree, replace_dir
    from lsdask.io.corpus import SCHEMA, Corpus
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lsdask.io.atomic import remove_tree, replace_dir
    from lsdask.io.corpus import SCHEMA, Corpus

logger = logging.getLogger(__name__)

__all__ = [
    "TRUE_TOPICS_NAME",
    "draw_corpus_matrix",
    "draw_documents",
    "draw_topics",
    "make_corpus",
    "run_tasks",
    "vocabulary",
    "word_cdf",
]

#: File beside the corpus holding the (K, V) float64 topics the documents were drawn from.
TRUE_TOPICS_NAME = "true_topics.npy"
#: Stream numbers mixed into the seed: topics and files get independent generators.
_TOPIC_STREAM = 0
_FILE_STREAM = 1
_LOG_EVERY_S = 10.0


# --------------------------------------------------------------------------- the model


def vocabulary(vocab_size: int) -> list[str]:
    """The synthetic vocabulary ``w00000, w00001, ...`` (at least five digits)."""
    width = max(5, len(str(max(vocab_size - 1, 0))))
    return [f"w{i:0{width}d}" for i in range(vocab_size)]


def draw_topics(n_topics: int, vocab_size: int, eta: float, seed: int) -> np.ndarray:
    """The true topics ``phi_k ~ Dir(eta)``, drawn from a generator seeded by ``seed``.

    Parameters
    ----------
    n_topics : int
        K.
    vocab_size : int
        V.
    eta : float
        Symmetric Dirichlet pseudo-count of every word (small: peaked topics).
    seed : int
        Seed; the same seed always gives the same topics.

    Returns
    -------
    numpy.ndarray of float64, shape (K, V)
        Rows sum to 1.
    """
    rng = np.random.default_rng([seed, _TOPIC_STREAM])
    topics = rng.dirichlet(np.full(vocab_size, float(eta)), size=n_topics)
    return topics / topics.sum(axis=1, keepdims=True)


def word_cdf(topics: np.ndarray) -> np.ndarray:
    """Cumulative word distribution of every topic, last entry exactly 1.

    Parameters
    ----------
    topics : numpy.ndarray, shape (K, V)
        Non-negative rows (normalized here).

    Returns
    -------
    numpy.ndarray of float64, shape (K, V)
        Word ``v`` of topic ``k`` is drawn by ``searchsorted(cdf[k], u, "right")``
        with ``u ~ U[0, 1)``; zero-probability words are never drawn.
    """
    cdf = np.cumsum(np.asarray(topics, dtype=np.float64), axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    return cdf


def _doc_lengths(
    rng: np.random.Generator, n_docs: int, mean_doc_length: float, dispersion: float
) -> np.ndarray:
    """``1 + NegBin(r, p)`` lengths with mean ``mean_doc_length`` (at least 1 token)."""
    extra = float(mean_doc_length) - 1.0
    if extra <= 0:
        return np.ones(n_docs, dtype=np.int64)
    p = dispersion / (dispersion + extra)
    return 1 + rng.negative_binomial(dispersion, p, size=n_docs).astype(np.int64)


def draw_documents(
    rng: np.random.Generator,
    cdf: np.ndarray,
    n_docs: int,
    *,
    alpha: float,
    mean_doc_length: float,
    length_dispersion: float = 2.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw LDA documents as CSR arrays, vectorized over documents and tokens.

    Parameters
    ----------
    rng : numpy.random.Generator
    cdf : numpy.ndarray, shape (K, V)
        Cumulative topic-word distributions from :func:`word_cdf`.
    n_docs : int
        Documents to draw.
    alpha : float
        Dirichlet concentration of each topic in a document's weights ``pi_d``.
    mean_doc_length : float
        Mean tokens per document.
    length_dispersion : float, default 2.0
        ``r`` of the negative binomial lengths (smaller: more spread).

    Returns
    -------
    indptr : numpy.ndarray of int64, shape (n_docs + 1,)
    word_ids : numpy.ndarray of int32
        Sorted and distinct within each document.
    counts : numpy.ndarray of float32
        Positive; document ``d`` holds ``N_d >= 1`` tokens.
    """
    K, V = cdf.shape
    lengths = _doc_lengths(rng, n_docs, mean_doc_length, length_dispersion)
    weights = rng.dirichlet(np.full(K, float(alpha)), size=n_docs)
    bad = ~np.isfinite(weights).all(axis=1)
    if bad.any():  # every gamma underflowed (tiny alpha): all weight on one topic
        weights[bad] = np.eye(K)[rng.integers(K, size=int(bad.sum()))]
    topic_counts = rng.multinomial(lengths, weights)  # (n_docs, K): n_dk
    docs = np.arange(n_docs, dtype=np.int64)
    keys = []
    for k in range(K):
        n_k = topic_counts[:, k]
        total = int(n_k.sum())
        if total == 0:
            continue
        words = np.searchsorted(cdf[k], rng.random(total), side="right")
        np.minimum(words, V - 1, out=words)
        keys.append(np.repeat(docs, n_k) * V + words)
    pairs, counts = np.unique(np.concatenate(keys), return_counts=True)
    doc_of_pair = pairs // V
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(doc_of_pair, minlength=n_docs), out=indptr[1:])
    return indptr, (pairs % V).astype(np.int32), counts.astype(np.float32)


def _row_group_table(
    first_doc_id: int, indptr: np.ndarray, word_ids: np.ndarray, counts: np.ndarray
) -> pa.Table:
    """One row group as an Arrow table of the corpus schema."""
    offsets = pa.array(indptr.astype(np.int32), type=pa.int32())
    n_docs = len(indptr) - 1
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(first_doc_id, first_doc_id + n_docs, dtype=np.int64)),
            pa.ListArray.from_arrays(offsets, pa.array(word_ids, type=pa.int32())),
            pa.ListArray.from_arrays(offsets, pa.array(counts, type=pa.float32())),
        ],
        schema=SCHEMA,
    )


def _write_part(
    path: str,
    file_index: int,
    first_doc_id: int,
    n_docs: int,
    docs_per_row_group: int,
    params: dict[str, Any],
) -> list[tuple[int, float]]:
    """Task: generate one Parquet file of ``n_docs`` documents; return (docs, tokens) per group.

    Seeded from ``(seed, file index)`` only. The file is written under a
    hidden name in the same folder and renamed, so a task that runs twice
    (a lost worker) leaves one complete file.
    """
    rng = np.random.default_rng([params["seed"], _FILE_STREAM, file_index])
    final = Path(path)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    sizes: list[tuple[int, float]] = []
    try:
        with pq.ParquetWriter(str(tmp), SCHEMA) as writer:
            for start in range(0, n_docs, docs_per_row_group):
                size = min(docs_per_row_group, n_docs - start)
                indptr, word_ids, counts = draw_documents(
                    rng,
                    params["cdf"],
                    size,
                    alpha=params["alpha"],
                    mean_doc_length=params["mean_doc_length"],
                    length_dispersion=params["length_dispersion"],
                )
                table = _row_group_table(first_doc_id + start, indptr, word_ids, counts)
                writer.write_table(table, row_group_size=size)
                sizes.append((size, float(counts.sum(dtype=np.float64))))
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return sizes


# --------------------------------------------------------------------------- running tasks


def _local_cluster(n_workers: int) -> tuple[Any, Any]:
    """A LocalCluster of worker processes with one thread each, and its client."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    return cluster, Client(cluster)


def _portable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` in a closure that Dask ships by value (cloudpickle), module and all.

    The workers then need not import this file, which is not part of a package
    (``datasets/`` is a folder of scripts). Plain pickle refuses a closure, so
    ``distributed`` falls back to cloudpickle, which copies ``fn`` by value once
    its module is registered for that.
    """
    import cloudpickle

    module = sys.modules.get(fn.__module__)
    if module is not None and fn.__module__ != "__main__":
        cloudpickle.register_pickle_by_value(module)

    def task(*args: Any) -> Any:
        return fn(*args)

    return task


def run_tasks(
    fn: Callable[..., Any],
    arg_list: Sequence[tuple[Any, ...]],
    shared: Any,
    client: Any = None,
    *,
    n_workers: int = 2,
    what: str = "tasks",
) -> list[Any]:
    """Run ``fn(*args, shared)`` for every ``args`` of ``arg_list``, one task each.

    Parameters
    ----------
    fn : callable
        A module-level function; its module is shipped to the workers by
        value, so they need not be able to import it.
    arg_list : sequence of tuple
        Positional arguments of each task.
    shared : object
        Passed to every task as the last argument; scattered to the workers once.
    client : None, "sync", a distributed.Client, or a scheduler address
        None starts a LocalCluster of ``n_workers`` processes for the call;
        "sync" runs the tasks one after the other in this process.
    n_workers : int, default 2
        Workers of the LocalCluster started when ``client`` is None.
    what : str
        Name of the tasks in log messages.

    Returns
    -------
    list
        The results, in the order of ``arg_list``.
    """
    if isinstance(client, str) and client == "sync":
        out = []
        for i, args in enumerate(arg_list):
            out.append(fn(*args, shared))
            logger.debug("%s: %d/%d done", what, i + 1, len(arg_list))
        return out
    from distributed import Client, as_completed

    task = _portable(fn)
    owned: list[Any] = []
    if client is None:
        cluster, client = _local_cluster(n_workers)
        owned = [client, cluster]
    elif isinstance(client, str):
        client = Client(client)
        owned = [client]
    try:
        # a list of one: a dict scattered alone would become one key per entry
        (shared_future,) = client.scatter([shared], broadcast=True, hash=False)
        futures = [client.submit(task, *args, shared_future, pure=False) for args in arg_list]
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[Any] = [None] * len(futures)
        last_log = time.perf_counter()
        try:
            for n_done, future in enumerate(as_completed(futures), start=1):
                results[index[future.key]] = future.result()
                if time.perf_counter() - last_log > _LOG_EVERY_S:
                    logger.info("%s: %d/%d done", what, n_done, len(futures))
                    last_log = time.perf_counter()
        except BaseException:
            client.cancel(futures)
            raise
        return results
    finally:
        for obj in owned:
            obj.close()


def _check_target(out: Path, overwrite: bool) -> None:
    if out.exists() and (not overwrite or not out.is_dir()):
        raise FileExistsError(
            f"out_dir {str(out)!r} already exists; pass overwrite=True (--overwrite) to "
            "replace it once the new one is complete, or choose another path"
        )


def _check_positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def _check_positive_float(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if not (x > 0 and np.isfinite(x)):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return x


# --------------------------------------------------------------------------- the corpus


def make_corpus(
    out_dir: str | os.PathLike[str],
    *,
    n_docs: int = 2_000_000,
    vocab_size: int = 20_000,
    n_topics: int = 100,
    mean_doc_length: float = 120,
    docs_per_row_group: int = 1000,
    docs_per_file: int = 50_000,
    alpha: float = 0.1,
    eta: float = 0.01,
    seed: int = 0,
    client: Any = None,
    n_workers: int = 2,
    length_dispersion: float = 2.0,
    overwrite: bool = False,
) -> Corpus:
    """Write a synthetic LDA corpus with known topics, one Dask task per Parquet file.

    Parameters
    ----------
    out_dir : str or os.PathLike
        The corpus directory to create (see the module docstring for its layout).
    n_docs : int, default 2,000,000
        Documents; ``doc_id`` runs from 0 to ``n_docs - 1`` in file order.
    vocab_size : int, default 20,000
        V; the words are ``w00000, w00001, ...``.
    n_topics : int, default 100
        K, the number of true topics.
    mean_doc_length : float, default 120
        Mean tokens per document (negative binomial lengths, at least 1).
    docs_per_row_group : int, default 1000
        Documents per row group, i.e. per memoized batch.
    docs_per_file : int, default 50,000
        Documents per Parquet file (rounded down to whole row groups), i.e.
        per task.
    alpha : float, default 0.1
        Concentration of each topic in a document's weights, ``pi_d ~ Dir(alpha)``.
    eta : float, default 0.01
        Topic-word concentration, ``phi_k ~ Dir(eta)``.
    seed : int, default 0
        Seeds the topics and, with the file index, every file: the same seed
        gives the same files whatever the client.
    client : None, "sync", a distributed.Client, or a scheduler address
        None starts a LocalCluster of ``n_workers`` processes for the call;
        "sync" generates in this process.
    n_workers : int, default 2
        Workers of the LocalCluster started when ``client`` is None.
    length_dispersion : float, default 2.0
        ``r`` of the negative binomial document lengths.
    overwrite : bool, default False
        Replace an existing ``out_dir`` (only once the new corpus is complete).

    Returns
    -------
    lsdask.io.corpus.Corpus
        The corpus, opened at ``out_dir``; its manifest's ``ingest`` entry
        records the generator's parameters.

    Raises
    ------
    FileExistsError
        If ``out_dir`` exists and ``overwrite`` is false.
    ValueError
        For invalid parameters.

    Notes
    -----
    Everything is written to a hidden temporary sibling of ``out_dir`` and
    renamed at the end; on any error it is removed and ``out_dir`` is left as
    it was.
    """
    n_docs = _check_positive("n_docs", n_docs)
    V = _check_positive("vocab_size", vocab_size)
    K = _check_positive("n_topics", n_topics)
    rows = _check_positive("docs_per_row_group", docs_per_row_group)
    per_file = _check_positive("docs_per_file", docs_per_file)
    if per_file < rows:
        raise ValueError(
            f"docs_per_file ({per_file}) must be at least docs_per_row_group ({rows}); "
            "a file holds whole row groups"
        )
    per_file -= per_file % rows
    mean_len = _check_positive_float("mean_doc_length", mean_doc_length)
    if mean_len < 1:
        raise ValueError(f"mean_doc_length must be at least 1; got {mean_doc_length!r}")
    params: dict[str, Any] = {
        "alpha": _check_positive_float("alpha", alpha),
        "mean_doc_length": mean_len,
        "length_dispersion": _check_positive_float("length_dispersion", length_dispersion),
        "seed": int(seed),
    }
    eta = _check_positive_float("eta", eta)
    out = Path(os.path.abspath(os.fspath(out_dir)))
    _check_target(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")

    t0 = time.perf_counter()
    topics = draw_topics(K, V, eta, int(seed))
    params["cdf"] = word_cdf(topics)
    files = [
        (f"part-{i:05d}.parquet", i, start, min(per_file, n_docs - start))
        for i, start in enumerate(range(0, n_docs, per_file))
    ]
    info = {
        "source": "synthetic LDA (datasets/make_synthetic_corpus.py)",
        "n_topics": K,
        "alpha": params["alpha"],
        "eta": eta,
        "mean_doc_length": mean_len,
        "length_dispersion": params["length_dispersion"],
        "seed": int(seed),
        "docs_per_file": per_file,
        "true_topics": TRUE_TOPICS_NAME,
    }
    try:
        Corpus.write(tmp, [], vocabulary(V), docs_per_row_group=rows, ingest_info=info)
        np.save(tmp / TRUE_TOPICS_NAME, topics)
        parts = tmp / "parts"
        args = [(str(parts / name), i, start, n, rows) for name, i, start, n in files]
        sizes = run_tasks(
            _write_part, args, params, client, n_workers=n_workers, what="corpus files"
        )
        corpus = Corpus.open(tmp, rescan=True)
        expected_tokens = sum(t for file_sizes in sizes for _, t in file_sizes)
        if corpus.n_docs != n_docs or not np.isclose(corpus.n_tokens, expected_tokens):
            raise RuntimeError(
                f"corpus {tmp}: the manifest counts {corpus.n_docs} documents and "
                f"{corpus.n_tokens:g} tokens, the tasks wrote {n_docs} and {expected_tokens:g}"
            )
        _check_target(out, overwrite)
        replace_dir(tmp, out)
    except BaseException:
        remove_tree(tmp)
        raise
    corpus = Corpus.open(out)
    logger.info(
        "wrote synthetic corpus %s: %d documents, %g tokens, V=%d, K=%d, %d files, "
        "%d batches in %.1f s",
        out, corpus.n_docs, corpus.n_tokens, V, K, len(files), len(corpus.batches),
        time.perf_counter() - t0,
    )  # fmt: skip
    return corpus


def draw_corpus_matrix(
    topics: np.ndarray,
    n_docs: int,
    *,
    alpha: float = 0.1,
    mean_doc_length: float = 120,
    length_dispersion: float = 2.0,
    seed: Any = 0,
) -> sp.csr_matrix:
    """Draw a small in-memory set of documents from given topics (heldout sets, appends).

    Parameters
    ----------
    topics : numpy.ndarray, shape (K, V)
        E.g. the ``true_topics.npy`` of a corpus made by :func:`make_corpus`.
    n_docs : int
    alpha, mean_doc_length, length_dispersion
        As for :func:`make_corpus`.
    seed : int or sequence of int
        Seed of ``numpy.random.default_rng``; use one that differs from the
        corpus's (say ``[seed, 1000 + night]``) for documents it does not hold.

    Returns
    -------
    scipy.sparse.csr_matrix of float32, shape (n_docs, V)
    """
    cdf = word_cdf(topics)
    indptr, word_ids, counts = draw_documents(
        np.random.default_rng(seed),
        cdf,
        _check_positive("n_docs", n_docs),
        alpha=_check_positive_float("alpha", alpha),
        mean_doc_length=_check_positive_float("mean_doc_length", mean_doc_length),
        length_dispersion=_check_positive_float("length_dispersion", length_dispersion),
    )
    return sp.csr_matrix((counts, word_ids, indptr), shape=(n_docs, cdf.shape[1]))


# --------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of this script."""
    p = argparse.ArgumentParser(
        description="Write a synthetic LDA Parquet corpus with known topics (true_topics.npy), "
        "one Dask task per Parquet file."
    )
    p.add_argument("--out", type=Path, required=True, help="corpus directory to create")
    p.add_argument("--n-docs", type=int, default=2_000_000, help="documents (default 2,000,000)")
    p.add_argument("--vocab-size", type=int, default=20_000, help="V (default 20,000)")
    p.add_argument("--n-topics", type=int, default=100, help="K true topics (default 100)")
    p.add_argument("--mean-doc-length", type=float, default=120, help="mean tokens per document")
    p.add_argument("--docs-per-row-group", type=int, default=1000, help="documents per batch")
    p.add_argument("--docs-per-file", type=int, default=50_000, help="documents per file/task")
    p.add_argument("--alpha", type=float, default=0.1, help="per-topic document concentration")
    p.add_argument("--eta", type=float, default=0.01, help="topic-word concentration")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    p.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://...)")
    p.add_argument("--sync", action="store_true", help="generate in this process (no Dask)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing corpus")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the script; return the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.sync and args.scheduler:
        parser.error("give --sync or --scheduler, not both")
    client = "sync" if args.sync else args.scheduler
    t0 = time.perf_counter()
    try:
        corpus = make_corpus(
            args.out,
            n_docs=args.n_docs,
            vocab_size=args.vocab_size,
            n_topics=args.n_topics,
            mean_doc_length=args.mean_doc_length,
            docs_per_row_group=args.docs_per_row_group,
            docs_per_file=args.docs_per_file,
            alpha=args.alpha,
            eta=args.eta,
            seed=args.seed,
            client=client,
            n_workers=args.workers,
            overwrite=args.overwrite,
        )
    except (FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = {
        "path": corpus.path,
        "n_docs": corpus.n_docs,
        "n_tokens": corpus.n_tokens,
        "vocab_size": corpus.vocab_size,
        "n_batches": len(corpus.batches),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
