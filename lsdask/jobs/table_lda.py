"""The table LDA job: fit a configured :class:`lsdask.LDA` (or :class:`lsdask.HDP`) on a
table read in place (:mod:`lsdask.io.tables`) and save it.

``lsdask fit --table`` is a thin layer over :func:`fit_table_lda`, the twin of
:func:`lsdask.jobs.corpus_lda.fit_corpus_lda` for a Parquet dataset or Delta
table that another tool wrote: it lists the table (its vocabulary's pass, for
a text column without one, runs on the fit's Dask client), fits, saves the
model with the pictures of its traces and returns the same
:class:`~lsdask.jobs.corpus_lda.CorpusFitReport`.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from lsdask.engine import make_executor
from lsdask.estimators.hdp import HDP
from lsdask.estimators.lda import LDA
from lsdask.estimators.params import clone
from lsdask.io.tables import TableOptions
from lsdask.jobs import commit
from lsdask.jobs.cluster import on_shared_client
from lsdask.jobs.corpus_lda import (
    CorpusFitReport,
    _early_stopping_report,
    _laps_in_checkpoint,
    _save_with_pictures,
)
from lsdask.persist import check_save_target

logger = logging.getLogger(__name__)

__all__ = ["fit_table_lda"]


def fit_table_lda(
    estimator: LDA,
    table: TableOptions,
    *,
    out_dir: Any = None,
    overwrite: bool = False,
    n_top_words: int = 8,
    n_show_topics: int = 10,
) -> CorpusFitReport:
    """Fit ``estimator`` on ``table``, save the model (with ``out_dir``).

    A clone of the estimator is fitted and returned as the report's
    ``model``. With ``checkpoint_dir`` and ``resume``, a fit resumed on the
    grown table keeps the memo of the row groups it knows (see
    docs/tables.md).

    Raises
    ------
    ValueError
        For ``algorithm="svi-gibbs"`` (it streams from corpora only), invalid
        parameters, or a table that cannot be read (a DataError).
    FileExistsError
        If ``out_dir`` exists and ``overwrite`` is False.
    """
    model = clone(estimator)
    # no record of the command in the checkpoint: a rerun of `lsdask fit --table` is new work
    model._command_id = None  # type: ignore[attr-defined]
    model._command_data = None  # type: ignore[attr-defined]
    if model.algorithm == "svi-gibbs":
        raise ValueError(
            "--algorithm svi-gibbs streams documents from an lsdask corpus; a table read in "
            "place is fitted with --algorithm memo (or svi, vb, esvi), or ingested first "
            "(lsdask ingest)"
        )
    if out_dir is not None:
        check_save_target(out_dir, overwrite)
    model.check_params()
    laps_before = _laps_in_checkpoint(model.checkpoint_dir) if model.resume else 0
    name = "HDP" if isinstance(model, HDP) else "LDA"
    with on_shared_client(model) as shared:
        link = getattr(shared, "dashboard_link", None)
        executor = None
        if table.builds_vocabulary and not (isinstance(shared, str) and shared == "sync"):
            executor = make_executor(shared)  # the shared client's: nothing to close
        source, vocab = table.source(executor)
        model.check_params(n_features=len(vocab))
        logger.info(
            "fitting %s K=%d, L=%s (%s) on %s: %d documents, %d batches",
            name, model.n_components, model.sparsity, model.algorithm, source.description,
            source.n_rows, source.n_batches,
        )  # fmt: skip
        start = time.perf_counter()
        model.fit(source, vocabulary=vocab)
        seconds = time.perf_counter() - start
    sizes = getattr(model, "size_trace_", None)
    n_tokens = float(sizes[-1]) if sizes is not None and len(sizes) else math.nan
    report = CorpusFitReport(
        model=model,
        corpus=source.description,
        n_docs=source.n_rows,
        n_tokens=n_tokens,
        vocab_size=len(vocab),
        K=model.n_components,
        L=model.sparsity,
        algorithm=model.algorithm,
        laps=int(model.n_laps_),
        laps_this_run=int(model.n_laps_) - laps_before,
        converged=bool(model.converged_),
        seconds=seconds,
        **_early_stopping_report(model),
        elbo_final=float(model.elbo_trace_[-1]),
        heldout=None,
        n_heldout_docs=0,
        heldout_score=None,
        top_words=model.top_words(n_top_words)[:n_show_topics],
        dashboard=None if model.client == "sync" else link,
        model_name=name,
    )
    if isinstance(model, HDP):
        report.K, report.max_components = int(model.n_components_), int(model.n_components)
        report.topic_weights = [float(w) for w in model.topic_weights_[: len(report.top_words)]]
    if out_dir is not None:
        with commit.output_step(f"the model in {out_dir}"):
            _save_with_pictures(report, None, Path(out_dir), overwrite)
    return report
