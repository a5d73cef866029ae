"""The transform job: every document's top-L topic weights under a saved model, in Parquet.

``lsdask transform`` prints :func:`format_transform_summary` of
:func:`transform_corpus`.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from lsdask.engine import make_executor
from lsdask.io import guarded
from lsdask.io.atomic import temp_sibling
from lsdask.io.corpus.names import DocumentNames
from lsdask.io.faults import fault_point
from lsdask.io.stores import is_store_url, open_location
from lsdask.jobs import commit
from lsdask.jobs.cluster import dask_client
from lsdask.jobs.inputs import check_same_vocab, loaded_topic_model, open_corpus
from lsdask.jobs.wording import plural
from lsdask.learn.base import in_waves

logger = logging.getLogger(__name__)

__all__ = [
    "WEIGHTS_SCHEMA",
    "TransformSummary",
    "format_transform_summary",
    "transform_corpus",
]

#: Schema of the Parquet file written by :func:`transform_corpus`.
WEIGHTS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.int64()),
        pa.field("doc_name", pa.string()),
        pa.field("topics", pa.list_(pa.int32())),
        pa.field("weights", pa.list_(pa.float32())),
    ]
)


@dataclass
class TransformSummary:
    """What :func:`transform_corpus` wrote: the file at ``path``, the weights of
    ``n_docs`` documents in ``n_batches`` row groups under a model of ``K``
    topics, at most ``L`` per document, in ``seconds``."""

    path: str
    n_docs: int
    n_batches: int
    K: int
    L: int
    seconds: float


def _weights_table(doc_ids: np.ndarray, weights: sp.csr_matrix, names: DocumentNames) -> pa.Table:
    """Arrow table of one batch: each row's name (null where the corpus records
    none) and topics ordered by decreasing weight."""
    W = sp.csr_matrix(weights)
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    order = np.lexsort((W.indices, -W.data, rows))  # by row, then weight desc, then topic
    offsets = pa.array(W.indptr.astype(np.int32), type=pa.int32())
    topics = pa.ListArray.from_arrays(
        offsets, pa.array(W.indices[order].astype(np.int32), type=pa.int32())
    )
    values = pa.ListArray.from_arrays(
        offsets, pa.array(W.data[order].astype(np.float32), type=pa.float32())
    )
    return pa.Table.from_arrays(
        [
            pa.array(np.asarray(doc_ids, dtype=np.int64), type=pa.int64()),
            pa.array(names.many(doc_ids), type=pa.string()),
            topics,
            values,
        ],
        schema=WEIGHTS_SCHEMA,
    )


def transform_corpus(
    model: Any,
    corpus: Any,
    out_path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    client: Any = None,
    n_workers: int | None = None,
) -> TransformSummary:
    """Write every document's top-L topic weights to a Parquet file, batch by batch.

    One row per document, with the schema :data:`WEIGHTS_SCHEMA`:
    ``doc_id int64``, ``doc_name string`` (the document's name where the corpus
    records one, e.g. the file it was ingested from; else null),
    ``topics list<int32>`` and ``weights list<float32>``
    (:meth:`lsdask.LDA.transform`: ``E[pi_d]`` over the topics the document
    uses, at most its L largest, renormalized, largest first; an empty
    document gets empty lists). For an HDP the topic ids are the columns of
    :meth:`lsdask.HDP.transform`: the order of its fitted attributes
    (``components_``, by decreasing ``E[beta_k]``). Each row group of the corpus is read and
    transformed by a batch task (on a Dask cluster as ``client`` says: a wave
    of as many tasks as the cluster runs at once is computed while the one
    before is written) and written as one row group, in corpus order, so
    memory holds two waves of batches at a time; the file is written under a
    temporary name in the same folder and renamed at the end.

    Parameters
    ----------
    model : str, os.PathLike, lsdask.LDA or lsdask.HDP
        A model directory (of an LDA or an HDP) or fitted model.
    corpus : str, os.PathLike or Corpus
        Documents over the model's vocabulary.
    out_path : str or os.PathLike
        The Parquet file to write.
    overwrite : bool, default False
        Replace an existing file at ``out_path``.
    client : None, "sync", str or distributed.Client
        Where the batch tasks run (:func:`lsdask.jobs.cluster.dask_client`); the
        default starts a LocalCluster of ``n_workers`` processes when the corpus
        has more than one row group, else runs in this process.
    n_workers : int, optional
        Workers of that LocalCluster (default 2).

    Returns
    -------
    TransformSummary

    Raises
    ------
    FileNotFoundError, FileExistsError, ValueError
        For a missing model or corpus, an existing output (without
        ``overwrite``), or a corpus over another vocabulary.
    """
    if is_store_url(out_path):
        return _transform_to_store(model, corpus, str(out_path), overwrite, client, n_workers)
    lda = loaded_topic_model(model)
    docs = open_corpus(corpus, "corpus")
    if lda.vocabulary_ is not None:
        check_same_vocab(lda.vocabulary_, docs, "corpus", "the model")
    elif docs.vocab_size != lda.n_features_in_:
        raise ValueError(
            f"corpus {docs.path} has {docs.vocab_size} words in its vocabulary, but the "
            f"model was fitted with {lda.n_features_in_}"
        )
    out = Path(out_path)
    if out.is_dir():
        raise FileExistsError(f"--out {str(out)!r} is a folder; name a .parquet file")
    if out.exists() and not overwrite:
        raise FileExistsError(
            f"{str(out)!r} exists; remove it or pass overwrite=True (lsdask: --overwrite)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    folder, tmp = out.parent, temp_sibling(out)
    start = time.perf_counter()
    n_docs = 0
    task = lda.transform_task()
    names = DocumentNames.of(docs)
    if client is None and len(docs.batches) <= 1:
        client = "sync"  # a cluster's start would cost more than one task
    try:
        with dask_client(client, n_workers) as where, guarded.open_write(folder, tmp.name) as f:
            with pq.ParquetWriter(f, WEIGHTS_SCHEMA) as w:
                for doc_ids, weights in in_waves(
                    make_executor(where), task, docs.batches, lda.posterior_
                ):
                    w.write_table(_weights_table(doc_ids, weights, names))
                    n_docs += len(doc_ids)
            f.flush()
            os.fsync(f.fileno())  # on disk before it is renamed in: a saved output is whole
        with commit.output_step(f"the weights in {out}"):  # a signal now: renamed in first
            fault_point("transform.output")
            guarded.replace(folder, tmp.name, out.name)
            guarded.fsync_dir(folder)
    except BaseException:
        guarded.unlink(folder, tmp.name)
        raise
    summary = TransformSummary(
        path=str(out),
        n_docs=n_docs,
        n_batches=len(docs.batches),
        K=int(lda.n_components),
        L=lda.topics_per_document,
        seconds=time.perf_counter() - start,
    )
    logger.info("wrote top-%d topic weights of %d documents to %s", summary.L, n_docs, out)
    return summary


def _transform_to_store(
    model: Any, corpus: Any, url: str, overwrite: bool, client: Any, n_workers: Any
) -> TransformSummary:
    """:func:`transform_corpus` into the object ``url`` of a store: the file is
    written locally, then uploaded as one object (readers see all of it or
    nothing)."""
    location = open_location(url, parameter="--out")
    if location.fs.exists(location.root) and not overwrite:
        raise FileExistsError(
            f"{location.url} exists; remove it or pass overwrite=True (lsdask: --overwrite)"
        )
    with tempfile.TemporaryDirectory(prefix="lsdask-transform-") as tmp:
        local = Path(tmp) / "weights.parquet"
        summary = transform_corpus(model, corpus, local, client=client, n_workers=n_workers)
        with commit.output_step(f"the weights in {location.url}"):
            location.fs.put_file(str(local), location.root)
    summary.path = location.url
    return summary


def format_transform_summary(summary: TransformSummary) -> str:
    """One line describing a :func:`transform_corpus` summary."""
    return (
        f"wrote top-{summary.L} topic weights (K={summary.K}) of {summary.n_docs:,} "
        f"documents in {plural(summary.n_batches, 'row group')} to {summary.path} "
        f"({summary.seconds:.1f} s)"
    )
