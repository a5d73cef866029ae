"""The patch-GMM job (Hughes & Sudderth, Sec. 4): image patches -> L-sparse vs dense GMM.

``lsdask demo`` (first part), ``lsdask fit-gmm`` and ``pipelines/patch_gmm.py``
are thin layers over these functions (the patches themselves are cut by
:func:`lsdask.jobs.patches.prepare_patches`):

- :func:`fit_and_report` fits a configured :class:`lsdask.GaussianMixture`
  (and the same model dense), scores heldout patches and draws ``elbo.png``
  and ``clusters.png``, and returns a :class:`PatchFitReport`;
- :func:`run_demo` does both on the two halves of a photograph shipped
  with matplotlib (no download);
- :func:`format_report` turns the results into text for the command line.

They log with :mod:`logging` and never print.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.estimators.gaussian import GaussianMixture
from lsdask.estimators.params import clone
from lsdask.io.patches import open_checked_array
from lsdask.io.sources import as_batch_source
from lsdask.jobs.cluster import on_shared_client
from lsdask.jobs.patches import DEMO_BATCH_SIZE, PatchStoreSummary, prepare_patches
from lsdask.jobs.wording import plural

logger = logging.getLogger(__name__)

__all__ = [
    "PATCH_ALPHA",
    "GmmRun",
    "PatchFitReport",
    "fit_and_report",
    "format_report",
    "run_demo",
    "run_label",
]

#: Concentration of the cluster weights used by the demo, ``lsdask fit-gmm``
#: and the pipeline, as in the paper's patch experiments (Sec. 4, alpha = 10).
PATCH_ALPHA = 10.0


def run_label(sparsity: int | None) -> str:
    """Legend label of a run: ``"L=4"`` or ``"dense"``."""
    return "dense" if sparsity is None else f"L={sparsity}"


@dataclass
class GmmRun:
    """One fit of :func:`fit_and_report`: the fitted ``model``, its ``laps``,
    whether it ``converged``, the wall time of ``fit`` in ``seconds``, its
    final ELBO and its heldout score (mean log-likelihood per row; None
    without heldout data)."""

    model: GaussianMixture
    laps: int
    converged: bool
    seconds: float
    elbo_final: float
    heldout_score: float | None


@dataclass
class PatchFitReport:
    """What :func:`fit_and_report` did.

    Attributes
    ----------
    n_train, n_heldout, n_features : int
        Rows of the training and heldout data, and their width.
    n_components, sparsity, covariance_type, algorithm
        The estimator's.
    runs : dict of str to GmmRun
        By label (:func:`run_label`): the estimator's own fit first, then
        the dense one it was compared with.
    top_clusters, top_weights : list
        The heaviest clusters of the first run and their weights.
    heldout_diff_percent : float or None
        Heldout score of the L-sparse run minus the dense one, relative to
        ``|dense|``; None without a comparison or heldout data.
    speedup : float or None
        Dense seconds / L-sparse seconds (both timed after a tiny warm-up
        fit, so that neither pays for loading the compiled kernels).
    elbo_plot, clusters_plot : str or None
        The pictures (None without ``out_dir``; no clusters picture for rows
        that are not square patches).
    patches : PatchStoreSummary or None
        The patch store's summary, where the job cut the patches.
    """

    n_train: int
    n_heldout: int
    n_features: int
    n_components: int
    sparsity: int | None
    covariance_type: str
    algorithm: str
    runs: dict[str, GmmRun]
    top_clusters: list[int]
    top_weights: list[float]
    heldout_diff_percent: float | None = None
    speedup: float | None = None
    elbo_plot: str | None = None
    clusters_plot: str | None = None
    patches: PatchStoreSummary | None = None

    @property
    def main(self) -> GmmRun:
        """The estimator's own fit."""
        return next(iter(self.runs.values()))


def _zarr_patch_size(X: Any) -> int | None:
    """The ``patch_size`` attribute of a Zarr array (or path to one), if any."""
    try:
        array = open_checked_array(X) if isinstance(X, str | os.PathLike) else X
        value = array.attrs.get("patch_size")
    except Exception:  # not a Zarr array, or no attributes: fall back to sqrt(D)
        return None
    return int(value) if isinstance(value, int | np.integer) else None


def _patch_side(X: Any, n_features: int, patch_size: int | None) -> int | None:
    """Side of the square patches of the data, or None if they are not patches."""
    if patch_size is not None:
        return patch_size
    side = _zarr_patch_size(X)
    if side is not None and side * side == n_features:
        return side
    root = math.isqrt(n_features)
    return root if root * root == n_features else None


def fit_and_report(
    estimator: GaussianMixture,
    train: Any,
    *,
    out_dir: str | os.PathLike[str] | None = None,
    heldout: Any = None,
    compare_dense: bool = True,
    patch_size: int | None = None,
    n_top: int = 5,
) -> PatchFitReport:
    """Fit ``estimator`` (and the same model dense), score heldout data, draw.

    The estimator's parameters say everything about the fit; its ``client``
    and ``n_workers`` where it runs: one Dask client is opened for both fits
    (the estimator keeps its own ``client``). With ``compare_dense``, a clone
    with ``sparsity=None`` is fitted with the same seed, laps and batches.

    Parameters
    ----------
    estimator : lsdask.GaussianMixture
        The configured estimator; fitted in place.
    train : str, os.PathLike or array-like
        Training rows: a Zarr path or array, a dask or numpy array.
    out_dir : str, os.PathLike or None
        Folder for ``elbo.png`` and ``clusters.png``; None draws nothing.
    heldout : str, os.PathLike, array-like or None
        Heldout rows scored with :meth:`~lsdask.GaussianMixture.score` (mean
        log-likelihood per row); None or an empty array skips scoring.
    compare_dense : bool, default True
        Also fit the dense model (when the estimator is L-sparse); not with
        a ``checkpoint_dir``, which holds one fit.
    patch_size : int or None, default None
        Side of the patches for ``clusters.png``; default the Zarr array's
        ``patch_size`` attribute, else ``sqrt(D)`` when D is a square. When
        the rows are not square patches, no cluster picture is drawn.
    n_top : int, default 5
        Cluster weights reported.

    Returns
    -------
    PatchFitReport

    Raises
    ------
    FileNotFoundError
        If a Zarr path does not exist.
    ValueError
        For invalid parameters or data.
    """
    # Check both inputs before spending time on the cluster and the fit.
    train_source = as_batch_source(train, estimator.batch_size)
    n_heldout = 0
    if heldout is not None:
        if isinstance(heldout, str | os.PathLike) and not Path(heldout).exists():
            raise FileNotFoundError(
                f"heldout: no Zarr array at {str(heldout)!r} (the path does not exist)"
            )
        n_heldout, n_features = _heldout_shape(heldout)
        if n_heldout and n_features != train_source.n_features:
            raise ValueError(
                f"heldout has {n_features} features per row, but the training data has "
                f"{train_source.n_features}; score the model on rows of the same kind (the "
                "same patch size and channels)"
            )
    if n_heldout == 0:
        heldout = None
    if not isinstance(n_top, int) or n_top < 1:
        raise ValueError(f"n_top must be a positive integer; got {n_top!r}")
    compare = compare_dense and estimator.sparsity is not None
    if estimator.checkpoint_dir is not None and compare:
        raise ValueError(
            "checkpoint_dir holds one fit; pass compare_dense=False to checkpoint the "
            "L-sparse one (or fit the dense model separately)"
        )
    models = {run_label(estimator.sparsity): estimator}
    if compare:
        models["dense"] = clone(estimator).set_params(sparsity=None)
    runs: dict[str, GmmRun] = {}
    with on_shared_client(*models.values()) as shared:
        if compare:
            _warm_up(estimator, shared, train_source.n_features)
        for label, model in models.items():
            logger.info(
                "fitting %s: K=%d, %d laps at most", label, model.n_components, model.n_laps
            )
            start = time.perf_counter()
            model.fit(train)
            seconds = time.perf_counter() - start
            runs[label] = GmmRun(
                model=model,
                laps=int(model.n_laps_),
                converged=bool(model.converged_),
                seconds=seconds,
                elbo_final=float(model.elbo_trace_[-1]),
                heldout_score=None if heldout is None else model.score(heldout),
            )
            logger.info(
                "%s: %d laps in %.1f s, final ELBO %.6g, heldout %s",
                label, model.n_laps_, seconds, model.elbo_trace_[-1], runs[label].heldout_score,
            )  # fmt: skip

    order = np.argsort(-estimator.weights_, kind="stable")[:n_top]
    report = PatchFitReport(
        n_train=train_source.n_rows,
        n_heldout=n_heldout,
        n_features=train_source.n_features,
        n_components=estimator.n_components,
        sparsity=estimator.sparsity,
        covariance_type=estimator.covariance_type,
        algorithm=estimator.algorithm,
        runs=runs,
        top_clusters=[int(k) for k in order],
        top_weights=[float(estimator.weights_[k]) for k in order],
    )
    if compare:
        sparse, dense = report.main, runs["dense"]
        if sparse.heldout_score is not None and dense.heldout_score:
            report.heldout_diff_percent = (
                100.0 * (sparse.heldout_score - dense.heldout_score) / abs(dense.heldout_score)
            )
        if sparse.seconds > 0:
            report.speedup = dense.seconds / sparse.seconds
    if out_dir is not None:
        _draw(report, train, Path(out_dir), patch_size)
    return report


def _warm_up(estimator: GaussianMixture, client: Any, n_features: int) -> None:
    """Run tiny sparse and dense fits so that neither timed fit pays for start-up.

    The first fit in a fresh process (the driver, or a new Dask worker) loads
    the compiled kernels; without this the first of the compared runs would
    look seconds slower than the second.
    """
    start = time.perf_counter()
    X = np.random.default_rng(0).normal(size=(512, n_features))
    for s in (1, None):
        GaussianMixture(
            2,
            covariance_type=estimator.covariance_type,
            sparsity=s,
            algorithm=estimator.algorithm,
            n_laps=1,
            batch_size=64,
            random_state=0,
            client=client,
            progress=False,
        ).fit(X)
    logger.info("warm-up fits took %.1f s", time.perf_counter() - start)


def _heldout_shape(X: Any) -> tuple[int, int]:
    """(rows, features) of a Zarr path/array, dask or numpy array, without reading the data."""
    if isinstance(X, str | os.PathLike):
        # the whole folder checked now, before the fit, not when it is scored after it
        shape = open_checked_array(X, where=f"heldout: Zarr array {str(X)!r}", whole=True).shape
    else:
        shape = getattr(X, "shape", None)
        if shape is None:
            shape = np.asarray(X).shape
    if len(shape) != 2:
        raise ValueError(f"heldout must be 2-D (rows, features); got shape {tuple(shape)}")
    return int(shape[0]), int(shape[1])


def _draw(report: PatchFitReport, train: Any, out_dir: Path, patch_size: int | None) -> None:
    """Write ``elbo.png`` and (for square patches) ``clusters.png`` into ``out_dir``."""
    from lsdask.plotting import plot_covariance_eigenvectors, plot_elbo_trace

    out_dir.mkdir(parents=True, exist_ok=True)
    n_train = max(report.n_train, 1)
    traces = {
        label: (run.model.lap_trace_, run.model.elbo_trace_ / n_train)
        for label, run in report.runs.items()
    }
    title = (
        f"{report.covariance_type} GMM, K={report.n_components}, "
        f"{report.algorithm}, {report.n_train:,} rows"
    )
    report.elbo_plot = str(
        plot_elbo_trace(
            traces, out_dir / "elbo.png", title=title, ylabel="ELBO per training row (nats/row)"
        )
    )
    model = report.main.model
    side = _patch_side(train, report.n_features, patch_size)
    covariances = np.asarray(model.covariances_)
    if covariances.ndim == 2:  # "diag": (K, D) variances
        covariances = np.stack([np.diag(v) for v in covariances])
    if side is None:
        logger.info("rows have %d features, not square patches: no clusters.png", report.n_features)
    else:
        report.clusters_plot = str(
            plot_covariance_eigenvectors(
                covariances, model.weights_, out_dir / "clusters.png", patch_size=side
            )
        )


def run_demo(
    estimator: GaussianMixture,
    out_dir: str | os.PathLike[str] = "lsdask-demo",
    *,
    random_state: int = 0,
    batch_size: int = DEMO_BATCH_SIZE,
) -> PatchFitReport:
    """The demo: patch GMM on a sample photograph, L-sparse vs dense.

    Cuts the two halves of matplotlib's ``grace_hopper.jpg`` (installed with
    matplotlib; no network) into 8x8 mean-removed patches with stride 4, one
    half for training and one held out (``random_state`` draws which), in
    ``batch_size`` patches per chunk in ``out_dir/patches``; then runs
    :func:`fit_and_report` of ``estimator`` with the pictures in ``out_dir``.

    Returns
    -------
    PatchFitReport
        With ``patches``, the store's summary.
    """
    from lsdask.io.patches import sample_images

    out_dir = Path(out_dir)
    summary = prepare_patches(
        sample_images(),
        out_dir / "patches",
        batch_size=batch_size,
        heldout_fraction=0.5,
        random_state=random_state,
    )
    report = fit_and_report(
        estimator, summary.train.path, out_dir=out_dir, heldout=summary.heldout.path
    )
    report.patches = summary
    return report


def format_report(report: PatchFitReport, *, title: str | None = None) -> str:
    """Readable multi-line summary of a :func:`fit_and_report` report."""
    lines = []
    if title:
        lines.append(title)
    patches = report.patches
    if patches:
        lines.append(
            f"data: {patches.train.n_patches:,} train patches "
            f"({plural(patches.train.n_images, 'image')}), "
            f"{patches.heldout.n_patches:,} heldout patches "
            f"({plural(patches.heldout.n_images, 'image')}), D={report.n_features}"
        )
        lines.append(f"      store: {patches.folder}")
    else:
        lines.append(
            f"data: {report.n_train:,} train rows, {report.n_heldout:,} heldout rows, "
            f"D={report.n_features}"
        )
    sparsity = report.sparsity
    lines.append(
        f"model: {report.covariance_type} Gaussian mixture, K={report.n_components}, "
        f"L={sparsity if sparsity is not None else 'dense'}, algorithm={report.algorithm}"
    )
    lines.append("")
    header = f"{'run':<8} {'laps':>4} {'conv':>4} {'seconds':>8} {'heldout loglik/row':>19} "
    lines.append(header + f"{'final ELBO':>16} {'per row':>10}")
    n_train = max(report.n_train, 1)
    for label, run in report.runs.items():
        score = run.heldout_score
        lines.append(
            f"{label:<8} {run.laps:>4} "
            f"{'yes' if run.converged else 'no':>4} "
            f"{run.seconds:>8.1f} "
            f"{'n/a' if score is None else f'{score:.4f}':>19} "
            f"{run.elbo_final:>16.1f} {run.elbo_final / n_train:>10.4f}"
        )
    lines.append("")
    main = report.main
    main_label = run_label(report.sparsity)
    if report.heldout_diff_percent is not None:
        lines.append(
            f"heldout log-likelihood per patch, {main_label} vs dense: "
            f"{main.heldout_score:.4f} vs {report.runs['dense'].heldout_score:.4f} "
            f"({report.heldout_diff_percent:+.2g} %, nats per patch)"
        )
    elif report.n_heldout == 0:
        lines.append("heldout log-likelihood: no heldout data")
    else:
        lines.append(f"heldout log-likelihood per patch, {main_label}: {main.heldout_score:.4f}")
    if report.speedup is not None:
        lines.append(f"fit time dense / {main_label}: {report.speedup:.2f}x")
    weights = ", ".join(
        f"k={k}: {w:.3f}" for k, w in zip(report.top_clusters, report.top_weights, strict=True)
    )
    lines.append(f"heaviest {len(report.top_weights)} clusters ({main_label}): {weights}")
    lines.append(
        f"final ELBO ({main_label}): {main.elbo_final:.1f} "
        f"({main.elbo_final / n_train:.4f} per row)"
    )
    pictures = [p for p in (report.elbo_plot, report.clusters_plot) if p]
    if pictures:
        lines.append("pictures: " + ", ".join(pictures))
    return "\n".join(lines)
