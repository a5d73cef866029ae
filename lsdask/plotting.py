"""Pictures of a fit: objective traces, the learned patch clusters, topics as images.

All functions draw on a :class:`matplotlib.figure.Figure` rendered by the
Agg canvas, so they never touch pyplot's global state or the interactive
backend: they work the same in scripts, on headless servers, in Dask workers
and in notebooks, and leave nothing open after they return.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.io import guarded

logger = logging.getLogger(__name__)

__all__ = [
    "elbo_trace_figure",
    "k_elbo_figure",
    "plot_covariance_eigenvectors",
    "plot_elbo_trace",
    "plot_k_elbo_trace",
    "plot_topic_images",
]


def _new_figure(width: float, height: float) -> Any:
    """A Figure attached to an Agg canvas (no pyplot, no GUI backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Save ``fig`` as a PNG at ``path``, creating the parent folder. The
    picture is written under a fresh name in that folder and renamed into
    place (:mod:`lsdask.io.guarded`), so a link or a FIFO planted at ``path``
    is replaced, never written through."""
    path = Path(path)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    tmp = f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with guarded.open_write(folder, tmp) as f:
            fig.savefig(f, format="png")
        guarded.replace(folder, tmp, path.name)
    except BaseException:
        guarded.unlink(folder, tmp)
        raise
    logger.info("saved %s", path)
    return path


def _as_trace(label: str, trace: Any) -> tuple[np.ndarray, np.ndarray]:
    """Check one ``(laps, values)`` pair of :func:`plot_elbo_trace`."""
    name = f"traces[{label!r}]"
    if not isinstance(trace, Sequence | np.ndarray) or len(trace) != 2:
        raise ValueError(
            f"{name} must be a pair (laps, values) of 1-D arrays; got {type(trace).__name__}"
            + (f" of length {len(trace)}" if hasattr(trace, "__len__") else "")
        )
    try:
        laps = np.asarray(trace[0], dtype=float)
        values = np.asarray(trace[1], dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must hold numbers: {err}") from err
    if laps.ndim != 1 or values.ndim != 1:
        raise ValueError(
            f"{name}: laps and values must be 1-D; got shapes {laps.shape} and {values.shape}"
        )
    if laps.shape != values.shape:
        raise ValueError(
            f"{name}: laps and values must have the same length; "
            f"expected {laps.shape[0]} values, got {values.shape[0]}"
        )
    if laps.size == 0:
        raise ValueError(f"{name} is empty; expected at least one (lap, value) point")
    return laps, values


#: the default label of the laps axis: laps are passes through the training data
LAPS_LABEL = "lap (passes through the training data)"


def plot_elbo_trace(
    traces: Mapping[str, tuple[Any, Any]],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    ylabel: str = "ELBO (nats)",
    xlabel: str = LAPS_LABEL,
) -> Path:
    """Plot objective traces of one or more runs against laps (or time) and save a PNG.

    Parameters
    ----------
    traces : mapping of str to (laps, values)
        One line per run, keyed by its legend label (e.g. ``"L=4"``,
        ``"dense"``). ``laps`` are the (fractional) passes through the data
        at which each value was recorded, e.g. an estimator's ``lap_trace_``
        (or the seconds of its ``time_trace_``); ``values`` the matching
        ``elbo_trace_`` or heldout scores.
    path : str or os.PathLike
        Where to write the PNG; the parent folder is created if needed.
    title : str or None, default None
        Figure title.
    ylabel, xlabel : str
        Labels of the vertical and horizontal axes, with their units (e.g.
        ``"heldout log-likelihood (nats/token)"``, ``"wall time (s)"``).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        If ``traces`` is empty, or a trace is not a pair of 1-D arrays of the
        same non-zero length.
    """
    fig = elbo_trace_figure(traces, title=title, ylabel=ylabel, xlabel=xlabel)
    return _save(fig, path)


def elbo_trace_figure(
    traces: Mapping[str, tuple[Any, Any]],
    *,
    title: str | None = None,
    ylabel: str = "ELBO (nats)",
    xlabel: str = LAPS_LABEL,
) -> Any:
    """The :class:`~matplotlib.figure.Figure` that :func:`plot_elbo_trace` saves."""
    if not isinstance(traces, Mapping):
        raise ValueError(
            f"traces must be a dict of label -> (laps, values); got {type(traces).__name__}"
        )
    if not traces:
        raise ValueError("traces is empty; expected at least one run (label -> (laps, values))")
    checked = {str(label): _as_trace(str(label), trace) for label, trace in traces.items()}

    fig = _new_figure(6.4, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    styles = ("-", "--", ":", "-.")
    for i, (label, (laps, values)) in enumerate(checked.items()):
        ax.plot(
            laps,
            values,
            linestyle=styles[i % len(styles)],
            marker="." if laps.size <= 60 else None,
            label=label,
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_k_elbo_trace(
    k: tuple[Any, Any],
    elbo: tuple[Any, Any],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    ylabel: str = "surrogate ELBO (nats)",
    xlabel: str = LAPS_LABEL,
) -> Path:
    """Plot the number of topics K and the objective against laps, one above the
    other, and save a PNG (an HDP fit's ``n_components_trace_`` and ``elbo_trace_``).

    Parameters
    ----------
    k, elbo : (laps, values)
        K after each lap and the objective at each of its ``lap_trace_`` points,
        each a pair of 1-D arrays of the same non-zero length.
    path : str or os.PathLike
        Where to write the PNG; the parent folder is created if needed.
    title : str or None, default None
        Figure title.
    ylabel : str, default "surrogate ELBO (nats)"
        Label of the objective's axis, with its units.
    xlabel : str
        Label of the shared laps axis.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        If a trace is not a pair of 1-D arrays of the same non-zero length.
    """
    return _save(k_elbo_figure(k, elbo, title=title, ylabel=ylabel, xlabel=xlabel), path)


def k_elbo_figure(
    k: tuple[Any, Any],
    elbo: tuple[Any, Any],
    *,
    title: str | None = None,
    ylabel: str = "surrogate ELBO (nats)",
    xlabel: str = LAPS_LABEL,
) -> Any:
    """The :class:`~matplotlib.figure.Figure` that :func:`plot_k_elbo_trace` saves."""
    k_laps, k_values = _as_trace("K", k)
    e_laps, e_values = _as_trace("ELBO", elbo)
    fig = _new_figure(6.4, 5.6)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for ax, laps, values, label in (
        (top, k_laps, k_values, "K (topics)"),
        (bottom, e_laps, e_values, ylabel),
    ):
        ax.plot(laps, values, marker="." if laps.size <= 60 else None)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    top.yaxis.get_major_locator().set_params(integer=True)
    bottom.set_xlabel(xlabel)
    if title:
        top.set_title(title)
    fig.tight_layout()
    return fig


#: magnitudes within this relative distance of a vector's largest count as tied
_PEAK_TIE_RTOL = 1e-6


def _peak_signs(vectors: np.ndarray) -> np.ndarray:
    """+1 or -1 per column of ``vectors``: the sign that makes the column's
    largest-magnitude entry positive, the first of them where several tie.
    Ties are taken within ``_PEAK_TIE_RTOL``: an eigenvector's entries carry
    the rounding of the LAPACK build, and an exact rule would let that
    rounding pick the sign (a symmetric pattern flips between machines)."""
    mag = np.abs(vectors)
    peak_row = np.argmax(mag >= mag.max(axis=0) * (1.0 - _PEAK_TIE_RTOL), axis=0)
    peak = vectors[peak_row, np.arange(vectors.shape[1])]
    return np.where(peak >= 0, 1.0, -1.0)


def _eigen_tiles(
    cov: np.ndarray, weights: np.ndarray, n_clusters: int, n_vectors: int, patch_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Leading eigenvectors of the heaviest clusters, as patches.

    Returns
    -------
    order : (R,) cluster indices, heaviest first (R = min(n_clusters, K))
    tiles : (R, V, patch_size, patch_size) eigenvectors, largest eigenvalue
        first (V = min(n_vectors, D)); each signed so that its
        largest-magnitude pixel (the first of tied ones) is positive
    shares : (R, V) each eigenvalue's share of the cluster's total variance
    """
    K, D = cov.shape[0], cov.shape[1]
    order = np.argsort(-weights, kind="stable")[: min(n_clusters, K)]
    n_vec = min(n_vectors, D)
    tiles = np.empty((len(order), n_vec, patch_size, patch_size))
    shares = np.empty((len(order), n_vec))
    for r, k in enumerate(order):
        eigvals, eigvecs = np.linalg.eigh(0.5 * (cov[k] + cov[k].T))
        eigvals = np.clip(eigvals[::-1][:n_vec], 0.0, None)
        eigvecs = eigvecs[:, ::-1][:, :n_vec]
        eigvecs = eigvecs * _peak_signs(eigvecs)
        tiles[r] = eigvecs.T.reshape(n_vec, patch_size, patch_size)
        total = float(np.sum(np.clip(np.diag(cov[k]), 0.0, None))) or 1.0
        shares[r] = eigvals / total
    return order, tiles, shares


def plot_covariance_eigenvectors(
    covariances: Any,
    weights: Any,
    path: str | os.PathLike[str],
    *,
    n_clusters: int = 16,
    n_vectors: int = 8,
    patch_size: int = 8,
) -> Path:
    """Draw the leading covariance eigenvectors of the heaviest clusters as patches.

    One row per cluster, the ``n_clusters`` clusters with the largest weight
    first; each row shows the eigenvectors of that cluster's covariance with
    the ``n_vectors`` largest eigenvalues as ``patch_size x patch_size``
    grayscale tiles (each tile scaled symmetrically around zero, mid-gray =
    0). This is the usual picture of the clusters of a patch GMM: smooth
    gradients and edges at some orientation and frequency.

    Parameters
    ----------
    covariances : array-like, shape (K, D, D)
        Cluster covariances, with ``D == patch_size ** 2``.
    weights : array-like, shape (K,)
        Cluster weights, used to order (and label) the rows.
    path : str or os.PathLike
        Where to write the PNG; the parent folder is created if needed.
    n_clusters : int, default 16
        Rows to show (at most K).
    n_vectors : int, default 8
        Eigenvectors per row (at most D).
    patch_size : int, default 8
        Side of the square patches.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        If the shapes do not match (the message names the parameter and gives
        the expected and received shapes), or a count is not a positive
        integer, or the covariances are not finite.
    """
    for name, value in (
        ("n_clusters", n_clusters),
        ("n_vectors", n_vectors),
        ("patch_size", patch_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}")
    cov = np.asarray(covariances, dtype=float)
    D = patch_size * patch_size
    if cov.ndim != 3 or cov.shape[1] != cov.shape[2]:
        raise ValueError(
            f"covariances must have shape (K, D, D); got {cov.shape}. "
            "Pass full covariance matrices (diagonal ones have axis-aligned eigenvectors)."
        )
    if cov.shape[1] != D:
        raise ValueError(
            f"covariances must have shape (K, {D}, {D}) for patch_size={patch_size}; "
            f"got {cov.shape}"
        )
    K = cov.shape[0]
    w = np.asarray(weights, dtype=float)
    if w.shape != (K,):
        raise ValueError(
            f"weights must have shape ({K},) to match covariances {cov.shape}; got {w.shape}"
        )
    if not np.all(np.isfinite(cov)):
        raise ValueError("covariances contain non-finite values (NaN or inf)")

    order, tiles, shares = _eigen_tiles(cov, w, n_clusters, n_vectors, patch_size)
    rows, n_vec = tiles.shape[:2]

    tile = 0.8  # inches per tile
    width, height = 1.3 + n_vec * tile, 0.9 + rows * tile
    fig = _new_figure(width, height)
    grid = fig.add_gridspec(rows, n_vec, left=1.2 / width, right=0.99,
                            top=1 - 0.75 / height, bottom=0.1 / height,
                            wspace=0.08, hspace=0.12)  # fmt: skip
    for r, k in enumerate(order):
        for c in range(n_vec):
            ax = fig.add_subplot(grid[r, c])
            scale = float(np.max(np.abs(tiles[r, c]))) or 1.0
            ax.imshow(tiles[r, c], cmap="gray", vmin=-scale, vmax=scale, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"v{c + 1}", fontsize=8)
            if c == 0:
                ax.set_ylabel(
                    f"k={k}\nw={w[k]:.3f}", rotation=0, ha="right", va="center", fontsize=8
                )
            ax.text(
                0.97,
                0.03,
                f"{100 * shares[r, c]:.0f}%",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=6,
                color="tab:orange",
            )
    fig.suptitle(
        # two lines: one was cut off at the figure's width
        f"Leading covariance eigenvectors of the\n{rows} heaviest of {K} clusters "
        "(% = share of variance)",
        y=1 - 0.12 / height,
        va="top",
        fontsize=9,
    )
    return _save(fig, path)


def _topic_array(name: str, value: Any, n_pixels: int, side: int) -> np.ndarray:
    """Check one (K, side * side) array of topics for :func:`plot_topic_images`."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a 2-D array of numbers: {err}") from err
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] != n_pixels:
        raise ValueError(
            f"{name} must have shape (K, {n_pixels}) for side={side} (one row of "
            f"side * side pixel weights per topic); got {arr.shape}"
        )
    return arr


def plot_topic_images(
    true_topics: Any,
    learned_topics: Any,
    path: str | os.PathLike[str],
    side: int,
    *,
    title: str | None = None,
) -> Path:
    """Draw true and learned topics over the pixels of a square image, matched.

    Top row: the true topics, each as a ``side x side`` image. Bottom row:
    the learned topic matched to each, one to one, by the Hungarian
    assignment on L1 distances (:func:`lsdask.synthetic.match_topics`), with
    that distance under it. Every image is scaled from 0 (black) to its own
    largest weight (white). The usual check of a topic model on the "bars"
    corpus (:func:`lsdask.synthetic.make_bars_corpus`): learned bars must look
    like bars.

    Parameters
    ----------
    true_topics : array-like, shape (K_true, side * side)
        Generating topics (rows are normalized before matching).
    learned_topics : array-like, shape (K_learned, side * side)
        Learned topics, e.g. :attr:`lsdask.LDA.topic_word_` or its
        ``components_`` (rows are normalized). With fewer learned topics than
        true ones, the true topics left over get an empty cell; learned topics
        left over are not drawn (the title counts them).
    path : str or os.PathLike
        Where to write the PNG; the parent folder is created if needed.
    side : int
        Side of the square image; word ``r * side + c`` is pixel ``(r, c)``.
    title : str or None, default None
        Figure title; default states the mean L1 distance.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        If ``side`` is not a positive integer, or an array is not
        ``(K, side * side)`` (the message gives the expected and received
        shapes), or a topic is negative, not finite or all zeros.
    """
    from lsdask.synthetic import match_topics

    if isinstance(side, bool) or not isinstance(side, int | np.integer) or side < 1:
        raise ValueError(f"side must be a positive integer; got {side!r}")
    side = int(side)
    n_pixels = side * side
    true = _topic_array("true_topics", true_topics, n_pixels, side)
    learned = _topic_array("learned_topics", learned_topics, n_pixels, side)
    match, distances = match_topics(true, learned)
    true = true / true.sum(axis=1, keepdims=True)
    learned = learned / learned.sum(axis=1, keepdims=True)

    n_cols = true.shape[0]
    tile = 0.9  # inches per image
    width, height = 0.9 + n_cols * tile, 1.0 + 2 * tile + 0.2
    fig = _new_figure(width, height)
    grid = fig.add_gridspec(2, n_cols, left=0.8 / width, right=1 - 0.1 / width,
                            top=1 - 0.5 / height, bottom=0.45 / height,
                            wspace=0.1, hspace=0.12)  # fmt: skip
    for k in range(n_cols):
        for row, image in ((0, true[k]), (1, learned[match[k]] if match[k] >= 0 else None)):
            ax = fig.add_subplot(grid[row, k])
            ax.set_xticks([])
            ax.set_yticks([])
            if image is not None:
                ax.imshow(
                    image.reshape(side, side),
                    cmap="gray",
                    vmin=0.0,
                    vmax=float(image.max()) or 1.0,
                    interpolation="nearest",
                )
            if row == 0:
                ax.set_title(f"{k}", fontsize=8)
            else:
                label = f"#{match[k]}\nL1 {distances[k]:.2f}" if match[k] >= 0 else "unmatched"
                ax.set_xlabel(label, fontsize=7)
            if k == 0:
                ax.set_ylabel("true" if row == 0 else "learned", fontsize=9)
    matched = distances[match >= 0]
    if title is None:
        title = f"true vs learned topics (mean L1 distance {float(np.mean(matched)):.3f})"
    left_over = learned.shape[0] - int(np.sum(match >= 0))
    if left_over:
        title += f"; {left_over} learned topic{'s' if left_over > 1 else ''} not shown"
    fig.suptitle(title, y=1 - 0.1 / height, va="top", fontsize=9)
    return _save(fig, path)
