"""The folder a saved model lives in, whatever its kind.

A model folder holds ``params.json`` (the format, its version, the parameters
and fitted scalars), ``arrays.npz`` (named float arrays, read back with
``allow_pickle=False``) and, for some kinds, UTF-8 text files beside them. It
is written into a temporary sibling folder and renamed into place once
complete, so a reader never sees half a model and a failed save leaves
nothing behind. The format modules (:mod:`~lsdask.persist.lda`,
:mod:`~lsdask.persist.gmm`) decide what goes into these files; this module
writes, checks and reads them.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from lsdask.io import fsops, guarded
from lsdask.io.atomic import recover_output, replace_dir, temp_sibling
from lsdask.persist.checked_npz import Bound, check_values, read_npz
from lsdask.persist.files import naming

PARAMS_NAME = "params.json"
ARRAYS_NAME = "arrays.npz"

#: run-time settings that belong to the fit, not to the model: a loaded model
#: gets the defaults (no client, no checkpoint folder of the run that made it)
NOT_SAVED = ("client", "checkpoint_dir", "resume", "storage_options")

#: Optional traces, stored when the model has them (models saved before a
#: trace was kept lack it).
TRACE_FIELDS = ("lap_trace_", "time_trace_", "size_trace_", "validation_trace_")


def json_value(name: str, value: Any) -> Any:
    """A parameter as a JSON value, or a ``ValueError`` naming it."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ValueError(
        f"cannot save parameter {name}={value!r} ({type(value).__name__}): only None, "
        "numbers and strings can be stored in params.json; set it to a plain value "
        "(e.g. random_state=0) before saving"
    )


def saved_params(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters as ``params.json`` stores them: JSON values, without the
    run-time settings of :data:`NOT_SAVED`."""
    return {
        name: json_value(name, value) for name, value in params.items() if name not in NOT_SAVED
    }


def drop_not_saved(root: Path, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` read from ``root``'s ``params.json`` without the run-time
    settings of :data:`NOT_SAVED`, which lsdask never writes there: one found
    (a hand-edited or foreign file) is dropped with a warning naming the file
    and the key, so a loaded model never fits into (and cleans) a checkpoint
    folder it was not given."""
    found = [name for name in NOT_SAVED if name in params]
    for name in found:
        warnings.warn(
            f"model {str(root)!r}: {PARAMS_NAME} holds {name}={params[name]!r}, a run-time "
            f"setting that lsdask never saves; ignored (the loaded model has the default "
            f"{name}; set it with set_params)",
            UserWarning,
            stacklevel=2,
        )
    return {name: value for name, value in params.items() if name not in NOT_SAVED}


def model_root(path: str | os.PathLike[str]) -> Path:
    """``path`` as a reader opens it: a model that a writer killed while it
    swapped it in left beside it is first put in place
    (:func:`lsdask.io.atomic.recover_output`)."""
    root = Path(path)
    recover_output(root)
    return root


def is_model_dir(path: Path) -> bool:
    """Whether ``path`` is a folder holding a ``params.json`` (a regular file:
    an :class:`~lsdask.io.guarded.UnsafePath` where it is a link or special file)."""
    return path.is_dir() and guarded.is_file(path, PARAMS_NAME)


def check_save_target(path: str | os.PathLike[str], overwrite: bool = False) -> None:
    """Raise unless a model may be saved to ``path`` (check before a long fit).

    Raises
    ------
    FileExistsError
        If ``path`` exists and is not a model directory, or is one and
        ``overwrite`` is false.
    """
    out = Path(path)
    if not out.exists():
        return
    if not is_model_dir(out):
        raise FileExistsError(
            f"{str(out)!r} exists and is not an lsdask model directory (no {PARAMS_NAME}); "
            "choose another path"
        )
    if not overwrite:
        raise FileExistsError(
            f"a model already exists at {str(out)!r}; pass overwrite=True (lsdask: "
            "--overwrite) to replace it, or choose another path"
        )


#: files put into the next model folder written in this context (name -> source
#: file), inside its atomic swap: see :func:`extra_files`
_EXTRA_FILES: contextvars.ContextVar[tuple[tuple[str, Path], ...]] = contextvars.ContextVar(
    "lsdask_extra_files", default=()
)


@contextlib.contextmanager
def extra_files(files: dict[str, Path]) -> Iterator[None]:
    """Within the block, a model folder written (:func:`write_model_dir`) also gets
    the files ``files`` (plain name -> the file to copy), written before the folder is
    put in place: pictures of a fit arrive with its model or not at all."""
    bad = [name for name in files if Path(name).name != name or name.startswith(".")]
    if bad:
        raise ValueError(f"extra files must be plain file names; got {bad}")
    token = _EXTRA_FILES.set(tuple(files.items()))
    try:
        yield
    finally:
        _EXTRA_FILES.reset(token)


def _write_new(folder: Path, out: Path, name: str, write: Callable[[IO[Any]], object],
               text: bool = False) -> None:  # fmt: skip
    """Write the new file ``name`` into the temporary model folder ``folder`` and
    force it to disk; an ``OSError`` (a full disk) names the file of ``out``."""
    with naming(out / name):
        mode = "w" if text else "wb"
        with guarded.open_write(folder, name, mode, newline="\n" if text else None) as fh:
            write(fh)
            fsops.fsync(fh)


def write_model_dir(
    out: Path,
    meta: dict[str, Any],
    arrays: dict[str, np.ndarray],
    overwrite: bool,
    texts: dict[str, str] | None = None,
    fill: Callable[[Path], None] | None = None,
) -> None:
    """Write ``params.json`` (``meta``), ``arrays.npz`` and ``texts`` (file name ->
    UTF-8 text) into a temporary folder beside ``out``, each file forced to disk
    and then the folder, and put it in place of ``out`` (checked again just
    before): a failed save leaves nothing behind and names the file it failed
    on. ``fill(folder)``, where given, writes more into the temporary folder first."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(out)
    try:
        with naming(tmp):
            guarded.makedirs(tmp.parent, tmp)
        if fill is not None:
            fill(tmp)
        _write_new(tmp, out, ARRAYS_NAME, lambda f: np.savez(f, **arrays))
        for name, text in (texts or {}).items():
            _write_new(tmp, out, name, lambda f, text=text: f.write(text), text=True)
        for name, source in _EXTRA_FILES.get():
            with open(source, "rb") as src:  # a file this process made, outside the folder
                _write_new(tmp, out, name, lambda f, src=src: shutil.copyfileobj(src, f))
        _write_new(
            tmp, out, PARAMS_NAME, lambda f: f.write(json.dumps(meta, indent=2) + "\n"), text=True
        )
        with naming(tmp):
            guarded.fsync_dir(tmp)
        check_save_target(out, overwrite)
        replace_dir(tmp, out)
    except BaseException:
        guarded.remove_tree(tmp.parent, tmp)
        raise


def read_json(root: Path) -> Any:
    """The parsed ``params.json`` of ``root``, or a ``ValueError`` naming it (an
    :class:`~lsdask.io.guarded.UnsafePath` for a link, a special file or one
    over the size such a file may have)."""
    try:
        return guarded.read_json(root, PARAMS_NAME, "state")
    except guarded.UnsafePath:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} is not valid JSON: {exc}") from exc


def read_meta(root: Path, fmt: str, version: int, kind: str) -> dict[str, Any]:
    """``params.json`` of a model directory, checked to be of format ``fmt`` and
    ``version`` (``kind`` names the model in errors)."""
    meta = read_json(root)
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ValueError(
            f"model {str(root)!r}: {PARAMS_NAME} is not an lsdask {kind} model "
            f"(format {found!r}, expected {fmt!r})"
        )
    if meta.get("version") != version:
        raise ValueError(
            f"model {str(root)!r}: {PARAMS_NAME} has version {meta.get('version')!r}; this "
            f"lsdask reads version {version}"
        )
    return meta


def read_arrays(root: Path, shapes: Mapping[str, Bound] | None = None) -> dict[str, np.ndarray]:
    """The arrays of a model folder's ``arrays.npz``, with clear errors when it
    is missing or corrupt (no pickles are loaded). ``shapes`` bounds named
    arrays by the model's sizes (from ``params.json``), checked in the file's
    headers before anything is read
    (:func:`~lsdask.persist.checked_npz.read_npz`)."""
    file = root / ARRAYS_NAME
    where = f"model {str(root)!r}: {ARRAYS_NAME}"
    if not guarded.is_file(root, ARRAYS_NAME):
        raise FileNotFoundError(f"{where} is missing")
    arrays = read_npz(file, where, root=root, shapes=shapes)
    for name, values in arrays.items():  # the model's arrays hold finite numbers
        if values.dtype.kind == "f" and not name.endswith("trace_"):  # a trace may hold nan
            check_values(where, name, values)
    return arrays
