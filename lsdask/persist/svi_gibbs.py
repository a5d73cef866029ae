"""SVI-Gibbs checkpoints: the sparse topics, the epoch's order and the random state.

One file, ``ckpt-svi-gibbs.npz`` in the checkpoint folder, replaced
atomically (written beside it, flushed, renamed over it): the stored
entries of ``M = Ñ / pi`` as CSR arrays, their column totals, the learned
document-topic prior where there is one, and a JSON
member with the scale, the step and epoch counters, the epoch's queue
position, the groups known (by key), the seed and the generator's state, the
per-epoch traces and the run's settings. A resumed run continues with the
minibatch after the last one the checkpoint holds.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask.errors import DataError
from lsdask.io import guarded
from lsdask.learn.svi_gibbs import StreamState
from lsdask.models.collapsed import StreamPrior
from lsdask.models.sparse_topics import SparseTopics
from lsdask.persist.checked_npz import read_npz
from lsdask.persist.checked_state import check_rng_state
from lsdask.persist.files import write_atomic

#: the checkpoint file of an SVI-Gibbs run in its checkpoint folder
FILE_NAME = "ckpt-svi-gibbs.npz"


def checkpoint_path(folder: str | os.PathLike[str]) -> Path:
    return Path(folder) / FILE_NAME


def save_stream_state(
    folder: str | os.PathLike[str], state: StreamState, settings: dict[str, Any]
) -> Path:
    """Write ``state`` (and the run's ``settings``, checked on resume) atomically."""
    folder = Path(folder)
    guarded.makedirs(folder)
    topics = state.topics
    meta = {
        "format": "lsdask-svi-gibbs-checkpoint",
        "version": 1,
        "settings": settings,
        "eta": topics.eta,
        "pi": topics.pi,
        "n_resets": topics.n_resets,
        "seed": state.seed,
        "rng_state": state.rng_state,
        "step": state.step,
        "epoch": state.epoch,
        "pos": state.pos,
        "keys": state.keys,
        "sizes": state.sizes,
        "finished": state.finished,
        "command": state.command,
        "nonzero_trace": state.nonzero_trace,
        "docs_trace": state.docs_trace,
        "time_trace": state.time_trace,
        "alpha_trace": state.alpha_trace,
    }
    M = topics.scaled.tocsr()
    buffer = io.BytesIO()
    np.savez(
        buffer,
        data=M.data,
        indices=M.indices.astype(np.int64),
        indptr=M.indptr.astype(np.int64),
        shape=np.array(M.shape, np.int64),
        totals=topics.scaled_totals,
        queue=state.queue.astype(np.int64),
        **_prior_arrays(topics.prior),
        meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
    )
    target = checkpoint_path(folder)
    tmp = folder / f".{FILE_NAME}.{os.getpid()}.tmp"
    guarded.unlink(folder, tmp)  # of an earlier process of this id, killed mid-write
    write_atomic(folder, target, lambda f: f.write(buffer.getvalue()), tmp=tmp)
    return target


def load_stream_state(folder: str | os.PathLike[str]) -> tuple[StreamState, dict[str, Any]] | None:
    """The state of the checkpoint in ``folder`` and its settings; None without one."""
    path = checkpoint_path(folder)
    if not guarded.exists(folder, FILE_NAME):
        return None
    where = f"checkpoint {path}"
    try:
        arrays = read_npz(path, where, root=folder, shapes={"shape": (2,)})
        meta = json.loads(arrays["meta"].tobytes().decode())
        if not isinstance(meta, dict):
            raise ValueError("its meta member is not a JSON object")
        if meta.get("format") != "lsdask-svi-gibbs-checkpoint":
            raise ValueError("not an SVI-Gibbs checkpoint")
        shape = tuple(int(x) for x in arrays["shape"])
        M = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=shape)
        M.check_format(full_check=True)
        totals = np.asarray(arrays["totals"], dtype=np.float64)
        queue = np.asarray(arrays["queue"], dtype=np.int64).reshape(-1, 2)
        values = np.concatenate([M.data, totals])
        if totals.shape != (shape[1],) or not np.isfinite(values).all() or (values < 0).any():
            raise ValueError("the stored topic-word entries are not finite and >= 0")
        if not 0 <= int(meta["pos"]) <= len(queue):
            raise ValueError(f"queue position {meta['pos']} outside its {len(queue)} entries")
        if len(queue) and (queue.min() < 0 or queue[:, 0].max() >= len(meta["keys"])):
            raise ValueError("the queue names groups the checkpoint does not list")
        sizes = np.asarray(meta["sizes"], dtype=np.int64)
        if sizes.shape != (len(meta["keys"]),) or (sizes < 0).any():
            raise ValueError(
                f"'sizes' must hold one count >= 0 per group of 'keys' ({len(meta['keys'])}); "
                f"got {sizes.tolist()}"
            )
        beyond = np.flatnonzero(queue[:, 1] >= sizes[queue[:, 0]]) if len(queue) else []
        if len(beyond):
            g, row = (int(x) for x in queue[beyond[0]])
            raise ValueError(
                f"'queue' entry {int(beyond[0])} names row {row} of group {g}, which holds "
                f"{int(sizes[g])} rows ('sizes')"
            )
        pi = float(meta["pi"])
        if not 0.0 < pi <= 1.0:
            raise ValueError(f"the running scale pi must be in (0, 1]; got {pi}")
        command = meta.get("command")  # absent from checkpoints written before it was kept
        if command is not None and not (
            isinstance(command, dict)
            and isinstance(command.get("id"), str)
            and isinstance(command.get("target"), int)
            and command["target"] >= 0
            and isinstance(command.get("done"), bool)
        ):
            raise ValueError("'command' must be an object of id, target (epochs) and done")
        prior = _read_prior(arrays, shape[1]) if "alpha" in arrays else None
        topics = SparseTopics(float(meta["eta"]), M, totals, pi, int(meta["n_resets"]), prior)
        state = StreamState(
            topics=topics,
            seed=int(meta["seed"]),
            rng_state=check_rng_state(meta["rng_state"]),
            step=int(meta["step"]),
            epoch=int(meta["epoch"]),
            queue=queue,
            pos=int(meta["pos"]),
            keys=[str(k) for k in meta["keys"]],
            sizes=[int(n) for n in sizes],
            finished=bool(meta["finished"]),
            nonzero_trace=[int(x) for x in meta["nonzero_trace"]],
            docs_trace=[int(x) for x in meta["docs_trace"]],
            time_trace=[float(x) for x in meta["time_trace"]],
            # absent from checkpoints written before it was kept
            alpha_trace=[float(x) for x in meta.get("alpha_trace", [])],
            command=command,
        )
        return state, dict(meta["settings"])
    except guarded.UnsafePath:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OSError,
            OverflowError, RecursionError) as exc:  # fmt: skip
        raise DataError(
            f"{where} is damaged or not an SVI-Gibbs checkpoint ({exc}); delete it to start "
            "over, or resume from another folder"
        ) from exc


def _prior_arrays(prior: StreamPrior | None) -> dict[str, np.ndarray]:
    """A learned prior's arrays in the checkpoint (none for a fixed one)."""
    if prior is None:
        return {}
    return {
        "alpha": prior.alpha,
        "prior_keys": prior.keys,
        "prior_mult": prior.mult,
        "prior_lengths": prior.lengths,
        "prior_length_mult": prior.n_docs_of_length,
    }


def _read_prior(arrays: dict[str, np.ndarray], K: int) -> StreamPrior:
    """The learned prior of a checkpoint's arrays, checked."""
    alpha = np.asarray(arrays["alpha"], dtype=np.float64)
    if alpha.shape != (K,) or not (np.isfinite(alpha).all() and alpha.min() > 0):
        raise ValueError(f"the learned prior 'alpha' must hold {K} positive finite values")
    keys = np.asarray(arrays["prior_keys"], dtype=np.int64)
    lengths = np.asarray(arrays["prior_lengths"], dtype=np.int64)
    mult = np.asarray(arrays["prior_mult"], dtype=np.float64)
    n_of = np.asarray(arrays["prior_length_mult"], dtype=np.float64)
    for name, k, w in (("prior_keys", keys, mult), ("prior_lengths", lengths, n_of)):
        if (
            k.shape != w.shape
            or k.ndim != 1
            or (k.size and (k.min() < 0 or (np.diff(k) <= 0).any()))
        ):
            raise ValueError(f"'{name}' must be sorted, distinct, >= 0, one per weight")
        if not (np.isfinite(w).all() and (w >= 0).all()):
            raise ValueError(f"the weights of '{name}' must be finite and >= 0")
    return StreamPrior(alpha, keys, mult, lengths, n_of)


def mark_command_done(folder: str | os.PathLike[str], command_id: str) -> bool:
    """Record in the checkpoint that the command ``command_id`` wrote its output
    (a rerun of it is then a new command); False where there is no checkpoint or
    it belongs to another command. The caller holds the folder's lock."""
    loaded = load_stream_state(folder)
    if loaded is None:
        return False
    state, settings = loaded
    if state.command is None or state.command.get("id") != command_id:
        return False
    state.command = {**state.command, "done": True}
    save_stream_state(folder, state, settings)
    return True


def epochs_in_checkpoint(folder: str | os.PathLike[str]) -> int | None:
    """Epochs made by the run whose checkpoint is in ``folder``; None without one."""
    loaded = load_stream_state(folder)
    return None if loaded is None else loaded[0].epoch
