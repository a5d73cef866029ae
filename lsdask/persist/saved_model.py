"""Save any registered estimator, and load any saved model, by its kind.

:func:`save_model` picks the format from the estimator's registered kind
(:func:`lsdask.persist.registry.kind_of`); :func:`load_model` picks it from
the ``format`` a model folder's ``params.json`` records. The format functions
of each kind (:func:`~lsdask.persist.lda.save_lda`,
:func:`~lsdask.persist.gmm.load_gmm`, ...) stay the way to save or load one
kind on purpose.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from lsdask.io import guarded
from lsdask.io.stores import is_store_url
from lsdask.persist import esvi_model, gmm, hdp, lda
from lsdask.persist.model_dir import PARAMS_NAME, model_root, read_json
from lsdask.persist.on_store import load_from_store, save_to_store
from lsdask.persist.registry import kind_of

__all__ = ["load_model", "save_model"]


class _Format(NamedTuple):
    name: str
    save: Callable[..., Path]
    load: Callable[..., Any]


#: the file format of each kind
_FORMATS = {
    lda.KIND: _Format(lda.FORMAT, lda.save_lda, lda.load_lda),
    gmm.KIND: _Format(gmm.FORMAT, gmm.save_gmm, gmm.load_gmm),
    hdp.KIND: _Format(hdp.FORMAT, hdp.save_hdp, hdp.load_hdp),
    # an LDA fitted by ESVI and saved block by block (save_lda picks it)
    "lda-esvi": _Format(esvi_model.FORMAT, lda.save_lda, esvi_model.load_esvi_lda),
}


def save_model(
    model: Any,
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Path | str:
    """Save a fitted estimator to the directory ``path``, atomically, in the
    format of its kind (an :class:`lsdask.LDA` as :func:`~lsdask.persist.save_lda`
    does, a :class:`lsdask.GaussianMixture` as :func:`~lsdask.persist.save_gmm`, an
    :class:`lsdask.HDP` as :func:`~lsdask.persist.hdp.save_hdp`). A store URL
    (``s3://bucket/models/m``, with ``storage_options``) gets the same folder as
    its next version (:mod:`lsdask.persist.on_store`); the URL is returned.

    Raises
    ------
    TypeError
        If no format saves estimators of ``model``'s class.
    lsdask.errors.NotFittedError, FileExistsError, ValueError
        As the format's save function.
    """
    kind = kind_of(model)
    if kind not in _FORMATS:
        raise TypeError(f"no file format saves models of kind {kind!r} ({type(model).__name__})")
    save = _FORMATS[kind].save
    if is_store_url(path):
        return save_to_store(
            lambda folder: save(model, folder), str(path),
            storage_options=storage_options, overwrite=overwrite,
        )  # fmt: skip
    return save(model, path, overwrite=overwrite)


def load_model(
    path: str | os.PathLike[str],
    *,
    client: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
) -> Any:
    """Load the model saved at ``path`` by :func:`save_model` (or a format's own
    save function), as the estimator of the format its ``params.json`` records.

    ``client`` becomes the loaded estimator's ``client`` (it is not saved). A
    store URL loads its newest version, or ``version``.

    Raises
    ------
    FileNotFoundError
        If ``path`` or its ``params.json`` does not exist.
    ValueError
        If ``params.json`` names no format lsdask reads, or the files are
        corrupt or do not belong together (as the format's load function).
    """
    if is_store_url(path):
        return load_from_store(
            lambda folder: load_model(folder, client=client), str(path),
            storage_options=storage_options, version=version,
        )  # fmt: skip
    root = model_root(path)
    if not guarded.is_file(root, PARAMS_NAME):
        raise FileNotFoundError(
            f"no lsdask model at {str(root)!r}: {PARAMS_NAME} is missing (save one with "
            "lsdask.persist.save_model)"
        )
    meta = read_json(root)
    found = meta.get("format") if isinstance(meta, dict) else None
    for fmt in _FORMATS.values():
        if fmt.name == found:
            return fmt.load(root, client=client)
    known = sorted(f.name for f in _FORMATS.values())
    raise ValueError(
        f"model {str(root)!r}: {PARAMS_NAME} has format {found!r}; this lsdask reads {known}"
    )
