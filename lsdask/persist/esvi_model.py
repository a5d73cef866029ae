"""Save an LDA fitted by ESVI block by block, and load it back, exactly.

A model fitted by ESVI keeps its topic-word blocks on the Dask workers
(:class:`lsdask.estimators.lda_esvi.ESVIFitted`); saving it never brings the
whole of lambda (K x V) into one process. The folder holds::

    model/
        params.json   # format lsdask-lda-esvi, the estimator's parameters, fitted scalars
        arrays.npz    # the traces, alpha_ (K,), eta_ (1,), the block token mass (P,)
        vocab.txt     # only when vocabulary_ is set
        blocks/       # ESVI's block store (lsdask.persist.esvi_store): MANIFEST.json,
                      # partition.npz and rotation-<r>/block-<b>.npz, one per block,
                      # each written by the worker that holds it

The folder is built beside ``path`` under a temporary name (the workers write
their blocks into it, each atomically; the manifest ties them together) and
put in place only when complete. :func:`load_esvi_lda` reads every block back
on the worker that will hold it (with a Dask client), or in this process.
This module knows the files; the estimator turns its blocks into them and
back (``ESVIFitted.save_blocks``, ``LDA._load_esvi_blocks``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.persist.esvi_store import ESVIStore
from lsdask.persist.model_dir import (
    PARAMS_NAME,
    check_save_target,
    model_root,
    read_arrays,
    read_meta,
    saved_params,
    write_model_dir,
)
from lsdask.persist.registry import entry
from lsdask.persist.topic_model import VOCAB_NAME, read_vocab

logger = logging.getLogger(__name__)

#: Value of ``params.json["format"]``.
FORMAT = "lsdask-lda-esvi"
#: Value of ``params.json["version"]`` written by this module.
VERSION = 1
#: The folder of the blocks inside a model folder.
BLOCKS = "blocks"
#: The fitted arrays saved beside the blocks.
ARRAY_FIELDS = (
    "elbo_trace_", "substep_elbo_trace_", "time_trace_", "lap_trace_", "size_trace_",
    "alpha_trace_", "alpha_", "block_mass_",
)  # fmt: skip


def is_partitioned(model: Any) -> bool:
    """Whether ``model`` is an LDA fitted by ESVI whose blocks are still on the
    workers and whose lambda was never gathered."""
    held = getattr(model, "__dict__", {})
    return held.get("_esvi_fitted") is not None and "posterior_" not in held


def save_esvi_lda(model: Any, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Save an LDA fitted by ESVI to the directory ``path`` block by block: each
    worker writes the block it holds; the driver writes the small files.

    Raises
    ------
    FileExistsError
        As :func:`lsdask.persist.save_lda`.
    lsdask.errors.ClusterError
        If the blocks are gone (the fit's Dask client was closed).
    """
    fitted = model.__dict__["_esvi_fitted"]
    fitted.check()
    out = Path(path)
    check_save_target(out, overwrite)
    K, V = fitted.model.n_topics, fitted.model.vocab_size
    arrays = {name: np.asarray(getattr(model, name), dtype=np.float64) for name in ARRAY_FIELDS}
    arrays["eta_"] = np.array([float(model.eta_)])
    vocab = model.vocabulary_
    texts = None if vocab is None else {VOCAB_NAME: "".join(f"{w}\n" for w in vocab)}
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "estimator": type(model).__name__,
        "params": saved_params(model._params_as_fitted()),
        "fitted": {
            "n_components": K,
            "vocab_size": V,
            "n_features_in_": V,
            "n_laps_": int(model.n_laps_),
            "converged_": bool(model.converged_),
            "has_vocabulary": vocab is not None,
            "n_docs": float(fitted.n_docs),
            "sums": {k: float(v) for k, v in fitted.run.sums.items()},
        },
    }
    # each worker writes the block it holds into the new folder's blocks store
    write_model_dir(out, meta, arrays, overwrite, texts,
                    fill=lambda tmp: fitted.save_blocks(ESVIStore(str(tmp / BLOCKS))))  # fmt: skip
    logger.info("saved LDA (ESVI, %d blocks) K=%d, V=%d to %s", fitted.n_parts, K, V, out)
    return out


def load_esvi_lda(path: str | os.PathLike[str], *, client: Any = None) -> Any:
    """Load an LDA saved by :func:`save_esvi_lda`. With ``client`` a Dask client
    (or a scheduler's address) of at least as many workers as blocks, every block
    is read by the worker that then holds it (a partitioned model, as after
    ``fit``); with None or ``"sync"``, all blocks are read into this process.

    Raises
    ------
    FileNotFoundError, ValueError
        A missing or corrupt file, named (as :func:`lsdask.persist.load_lda`).
    lsdask.errors.DataError
        A missing or damaged block file, named.
    """
    root = model_root(path)
    meta = read_meta(root, FORMAT, VERSION, "LDA (ESVI)")
    fitted, params = meta.get("fitted"), meta.get("params")
    if not isinstance(fitted, dict) or not isinstance(params, dict):
        raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} lacks 'params' or 'fitted'")
    K = fitted.get("n_components")
    shapes = {"alpha_": (K,), "eta_": (1,)} if isinstance(K, int) and K >= 1 else {"eta_": (1,)}
    arrays = read_arrays(root, shapes)
    vocab = read_vocab(root, int(fitted["vocab_size"])) if fitted.get("has_vocabulary") else None
    est = entry("lda").cls(**params)
    est.set_params(client=client)
    est._load_esvi_blocks(ESVIStore(str(root / BLOCKS)), fitted, arrays, vocab)
    return est
