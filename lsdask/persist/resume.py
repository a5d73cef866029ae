"""Checkpointing a fit: the checkpoint folder, resuming, and stopping cleanly
on SIGINT/SIGTERM.

A fit describes what it asks of its checkpoint folder with plain values (a
:class:`CheckpointSettings`); the estimators make one from their parameters.
A fit holds its checkpoint folder's lock from start to end
(:func:`checkpoint_lock`, :func:`holding_checkpoint_folder`): a second fit on
the same folder would delete the first one's memo files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lsdask.errors import DataError, FitInterrupted
from lsdask.io import guarded
from lsdask.io.locks import FolderLock
from lsdask.io.stores import is_store_url
from lsdask.learn.protocols import HasMoves
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.persist.checkpoint_store import StoreMirror
from lsdask.persist.memo_files import DiskMemo
from lsdask.persist.model_config import model_from_config, model_to_config

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CheckpointSettings:
    """What a fit asks of its checkpoint folder.

    Attributes
    ----------
    folder : str, os.PathLike or None
        The checkpoint folder (the ``checkpoint_dir`` parameter); None
        writes no checkpoints.
    resume : bool
        Continue the latest checkpoint in ``folder`` (a fresh start if it
        holds none).
    params : dict
        The fit's settings, JSON-able, written into every checkpoint and
        compared with a resumed one's: ``estimator`` (the class name),
        ``n_components``, ``sparsity``, ``batches_per_update``, ``alpha`` and
        ``vocabulary_sha256`` (the words of an LDA fit's vocabulary, or None).
    algorithm : str
        The learning algorithm; checkpoints need ``"memo"``.
    n_init : int
        Initializations; checkpoints need one.
    """

    folder: str | os.PathLike[str] | None
    resume: bool
    params: dict[str, Any]
    algorithm: str = "memo"
    n_init: int = 1


_ADVICE = (
    "Two fits on one checkpoint folder would delete each other's memo files. Wait for it "
    "(lsdask fit ... --wait SECONDS; Python: with lsdask.io.locks.lock_settings(wait=SECONDS): "
    "...fit(...)), or give this fit another checkpoint folder."
)


def checkpoint_lock(
    folder: str | os.PathLike[str] | None,
    *,
    wait: float | None = None,
    enabled: bool | None = None,
) -> contextlib.AbstractContextManager[Any]:
    """The lock a fit holds on its checkpoint ``folder`` (created if missing)
    while it runs; nothing to hold for None, or for a path that is a file
    (:func:`open_resume` says what is wrong with it). ``wait`` and ``enabled``
    default to :func:`lsdask.io.locks.lock_settings`'s.

    Raises
    ------
    lsdask.errors.LockError
        On entering, if another fit holds the folder (past ``wait``), naming it.
    """
    if not isinstance(folder, str | os.PathLike) or (
        os.path.exists(folder) and (not os.path.isdir(folder) or _foreign(Path(folder)))
    ):
        # None, a value the estimator's checks refuse, or a folder open_resume refuses
        # (no lock file is written into it)
        return contextlib.nullcontext()
    # a store location's working copy is held from its pull to its last commit
    # (store_checkpoints); the fit and the job inside that take it again
    mirrored = os.path.realpath(folder) in _MIRRORS
    return FolderLock(
        folder, "checkpoint folder", _ADVICE, wait=wait, enabled=enabled, reentrant=mirrored
    )


def _foreign(root: Path) -> list[str]:
    """What a folder without a checkpoint holds that checkpoints are not written
    among (a checkpoint folder holds ``memo/``, ``ckpt-*``, ``LATEST`` and hidden
    files); empty for a checkpoint folder."""
    if guarded.exists(root, "LATEST"):
        return []
    return [
        name
        for name in guarded.listdir(root)
        if name != "memo" and not name.startswith(("ckpt-", ".", "LATEST"))
    ]


def holding_checkpoint_folder(fit: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate an estimator's ``fit``: it holds the lock of its checkpoint
    folder (the ``checkpoint_dir`` attribute) from before the checkpoint is
    read until after the last one is written (:func:`checkpoint_lock`)."""

    @functools.wraps(fit)
    def locked_fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        url = getattr(self, "checkpoint_dir", None)
        if is_store_url(url):
            return _fit_with_store_checkpoints(fit, self, url, *args, **kwargs)
        with checkpoint_lock(url):
            return fit(self, *args, **kwargs)

    return locked_fit


#: the working copies of store checkpoint folders of the fits under way, by folder
_MIRRORS: dict[str, StoreMirror] = {}


def _fit_with_store_checkpoints(fit: Callable[..., Any], est: Any, url: str, *args, **kwargs):
    """Run ``fit`` with ``checkpoint_dir`` the working copy of the store location
    ``url`` (:func:`store_checkpoints`)."""
    options = getattr(est, "storage_options", None)
    with store_checkpoints(url, options, getattr(est, "algorithm", "memo")) as folder:
        est.checkpoint_dir = str(folder)
        try:
            return fit(est, *args, **kwargs)
        finally:
            est.checkpoint_dir = url


@contextlib.contextmanager
def store_checkpoints(
    url: str, storage_options: Any = None, algorithm: str = "memo"
) -> Iterator[Path]:
    """The local working copy of the checkpoint location ``url`` in a store
    (:mod:`lsdask.persist.checkpoint_store`), locked and brought to the newest
    version; every checkpoint written into it is committed to the store (by
    :func:`checkpointing`), and what is there when the block ends without an
    error too."""
    if algorithm not in ("memo", "vb"):
        raise ValueError(
            f"checkpoint_dir {url}: checkpoints in a store are written for algorithm 'memo' "
            f"and 'vb'; {algorithm!r} writes its own from the workers. Give a local folder "
            "(on a file system every worker shares)"
        )
    mirror = StoreMirror(url, storage_options)
    key = os.path.realpath(mirror.folder)
    if key in _MIRRORS:
        raise ValueError(f"checkpoint_dir {url}: already in use by a fit of this process")
    with checkpoint_lock(str(mirror.folder)):
        mirror.pull()
        _MIRRORS[key] = mirror
        try:
            yield mirror.folder
        finally:
            _MIRRORS.pop(key, None)
        mirror.push()  # what was written after the last checkpoint


def open_resume(settings: CheckpointSettings, asked: dict[str, Any]) -> dict[str, Any] | None:
    """The checkpoint to resume from, or None for a fresh run; one written by
    another estimator or number of components, or whose model differs from
    ``asked`` (see :func:`check_resumed_model`), is refused.

    ``resume=True`` on an empty folder starts fresh (so a scheduled job can
    always pass it); ``resume=False`` refuses a folder that already holds a
    checkpoint rather than silently overwriting it.
    """
    if settings.folder is None:
        if settings.resume:
            raise ValueError("resume=True needs checkpoint_dir: the folder to resume from")
        return None
    if settings.algorithm != "memo":
        raise ValueError(
            f"checkpoint_dir needs algorithm='memo' (memoized VI); got {settings.algorithm!r}"
        )
    if settings.n_init != 1:
        raise ValueError(f"checkpoint_dir needs n_init=1; got {settings.n_init}")
    root = Path(settings.folder)
    if root.exists() and not root.is_dir():
        raise ValueError(
            f"checkpoint_dir {str(root)!r} is a file; name a folder (new, empty, or one "
            "holding a checkpoint)"
        )
    folder = CheckpointDir(root)
    if folder.latest() is None:
        foreign = _foreign(root)
        if foreign:
            raise ValueError(
                f"checkpoint_dir {str(root)!r} holds no checkpoint but other things (e.g. "
                f"{foreign[:3]}), and checkpoints are not written among them; choose a new or "
                "empty folder (lsdask: --checkpoint/--resume DIR)"
            )
        if settings.resume:
            logger.warning("no checkpoint in %s yet: starting a fresh fit there", root)
        return None
    if not settings.resume:
        raise ValueError(
            f"checkpoint_dir {str(folder.root)!r} already holds a checkpoint; pass resume=True "
            "(--resume DIR in place of --checkpoint DIR on the command line) to continue it, "
            "or choose an empty folder"
        )
    document = folder.read(with_init=False)
    saved = _saved_params(document)
    params = settings.params
    if saved["estimator"] != params["estimator"]:
        raise ValueError(
            f"checkpoint {document['path']} was written by {saved['estimator']}, "
            f"not {params['estimator']}"
        )
    if saved["n_components"] != params["n_components"]:
        raise ValueError(
            f"checkpoint {document['path']} has n_components={saved['n_components']}; "
            f"got n_components={params['n_components']}. Resume with the checkpoint's number "
            "of components (lsdask fit --topics, fit-gmm --components), or start a new "
            "checkpoint folder"
        )
    for name in ("sparsity", "batches_per_update"):
        if saved.get(name) != params.get(name):
            logger.warning(
                "resuming with %s=%r where the checkpoint used %r",
                name, params.get(name), saved.get(name),
            )  # fmt: skip
    try:
        document["model"] = model_from_config(document["config"]["model"])
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise DataError(
            f"checkpoint {document['path']}: state.json: config.model does not make a model "
            f"({type(exc).__name__}: {exc}); the file was modified. Start a new checkpoint folder"
        ) from exc
    check_resumed_model(document, asked)
    _check_carried(document)
    if document["has_init"]:  # its arrays bounded by the model's statistics, now checked
        limits = {name: value.shape for name, value in document["model"].empty_stats().items()}
        document["init_stats"] = folder.read_init(document["path"], limits)
    document["best_model"], document["best_stats"] = _read_best(folder, document, params)
    return document


def _read_best(
    folder: CheckpointDir, document: dict[str, Any], params: dict[str, Any]
) -> tuple[Any, Any]:
    """Early stopping's best lap of the checkpoint, where it is an earlier lap:
    the model as it was then (moves may have lowered K since, never raised it
    above the fit's ``n_components``) and its statistics; else ``(None, None)``."""
    best = document["state"].best
    if best is None or not document["has_best"]:
        return None, None
    model = document["model"]
    K = best["n_components"]
    if K != model.n_components:
        if not (isinstance(model, HasMoves) and model.n_components < K <= params["n_components"]):
            raise DataError(
                f"checkpoint {document['path']}: state.json: best.n_components is {K}, "
                f"not between the model's {model.n_components} and the fit's "
                f"{params['n_components']}; the file was modified"
            )
        model = model.resized(K)
    limits = {name: value.shape for name, value in model.empty_stats().items()}
    return model, folder.read_best(document["path"], limits)


def _check_carried(document: dict[str, Any]) -> None:
    """Refuse sticks carried by a checkpoint (``state.carried``: ``rho``,
    ``omega``) beyond its model's number of components: moves only ever lower
    it, and the resumed model is sized by them."""
    carried = document["state"].carried
    if not isinstance(carried, dict) or "rho" not in carried:
        return
    K = getattr(document["model"], "n_components", None)
    n = len(carried["rho"])
    if not (isinstance(K, int) and 1 <= n <= K and len(carried.get("omega", [])) == n):
        raise DataError(
            f"checkpoint {document['path']}: state.json: carried.rho and carried.omega hold "
            f"{n} and {len(carried.get('omega', []))} sticks; expected as many, between 1 and "
            f"the model's n_components ({K}); the file was modified. Start a new checkpoint "
            "folder"
        )


def _saved_params(document: dict[str, Any]) -> dict[str, Any]:
    """The fit settings a checkpoint's ``config.params`` records, checked to hold
    the estimator's name and number of components, with a model beside them."""
    config = document["config"]
    saved = config.get("params")
    n = saved.get("n_components") if isinstance(saved, dict) else None
    if not (
        isinstance(saved, dict)
        and isinstance(saved.get("estimator"), str)
        and isinstance(n, int)
        and not isinstance(n, bool)
        and isinstance(config.get("model"), dict)
    ):
        raise DataError(
            f"checkpoint {document['path']}: state.json: config lacks params.estimator (a "
            "name), params.n_components (a whole number) or model; the file was modified. "
            "Start a new checkpoint folder"
        )
    return saved


def check_resumed_model(resumed: dict[str, Any], asked: dict[str, Any]) -> None:
    """Refuse to resume a checkpoint whose model differs from the one this fit
    asks for (``asked``: model configuration fields such as ``vocab_size``,
    ``eta``, ``alpha``, ``dim``, observation ``class``), before anything is
    written into it: the fit would otherwise go on with the checkpoint's model
    while reporting the new settings, or fail half-way and damage it."""
    saved = model_to_config(resumed["model"])
    saved = {**saved, **saved.get("observation", {})}
    different = {k: (saved.get(k), v) for k, v in asked.items() if saved.get(k) != v}
    if different:
        what = ", ".join(f"{k} {old!r} (asked {new!r})" for k, (old, new) in different.items())
        raise ValueError(
            f"checkpoint {resumed['path']} holds a model with {what}. Resume with the "
            "checkpoint's settings and vocabulary (new documents: ingest them with --vocab "
            "of the first corpus), or start a new checkpoint folder"
        )


def checkpointing(
    settings: CheckpointSettings, model: Any, batches: list, resumed: dict[str, Any] | None
) -> tuple[DiskMemo, Callable]:
    """A disk memo for the batches (mapped by key from the resumed checkpoint)
    and the function that writes checkpoints of ``model`` (its configuration
    and ``settings.params`` go into every checkpoint) into ``settings.folder``."""
    keys = [str(b.key) for b in batches]
    if len(set(keys)) != len(keys):
        raise ValueError("batches must have distinct keys to be checkpointed")
    folder = CheckpointDir(settings.folder)
    files = None
    if resumed is not None:
        saved = resumed["memo"]
        files = [saved.get(k) for k in keys]
        new = sum(f is None for f in files)
        removed = len(set(saved) - set(keys))
        if new == len(keys) and resumed.get("init_stats") is None:
            raise ValueError(
                f"checkpoint {resumed['path']} holds statistics for none of the {len(keys)} "
                f"batches given (it knows {len(saved)} other batches): resuming needs the "
                "data it was trained on, with new batches beside it. Pass that data, or start a "
                "new checkpoint folder"
            )
        logger.info(
            "resuming %s: %d batches with memo, %d new, %d removed",
            resumed["path"].name, len(keys) - new, new, removed,
        )  # fmt: skip
        resumed["state"].rekey(resumed.get("keys"), keys)
    limits = {name: value.shape for name, value in model.empty_stats().items()}
    memo = folder.memo(len(keys), files, limits)
    config = {"model": model_to_config(model), "params": dict(settings.params)}

    mirror = _MIRRORS.get(os.path.realpath(settings.folder))

    def write(state, memo_store, init_stats, best_stats=None):
        path = folder.write(state, memo_store, keys, config, init_stats, best_stats)
        if mirror is not None:  # a working copy of a store location: commit it
            mirror.push()
        return path

    return memo, write


@contextlib.contextmanager
def stop_on_signals(enabled: bool) -> Iterator[Callable[[], bool]]:
    """While active, the first SIGINT or SIGTERM only sets a flag that the
    learner checks after each wave (a second SIGINT interrupts at once); the
    :class:`FitInterrupted` it then raises carries the signal's number."""
    requested = threading.Event()
    received: list[int] = []
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield requested.is_set
        return

    def handler(signum, frame):
        if requested.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        logger.warning(
            "signal %d: stopping after the current batches, writing a checkpoint", signum
        )
        received.append(signum)
        requested.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested.is_set
    except FitInterrupted as stop:
        stop.signal = received[0] if received else None
        raise
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def is_rerun(command: dict[str, Any] | None, command_id: str | None) -> bool:
    """Whether a run of the command ``command_id`` reruns the command a checkpoint
    records (``command``: its ``id`` and ``done``) that did not write its output
    (interrupted, or killed before it could)."""
    return (
        command_id is not None
        and command is not None
        and command.get("id") == command_id
        and not command.get("done")
    )
