"""The patch-GMM job (Hughes & Sudderth, Sec. 4): image patches -> L-sparse vs dense GMM.

``lsdask demo`` (first part), ``lsdask patches``, ``lsdask fit-gmm`` and
``pipelines/patch_gmm.py`` are thin layers over these functions:

- :func:`prepare_patches` cuts images into mean-removed patches in
  ``train.zarr`` / ``heldout.zarr``;
- :func:`fit_and_report` fits an L-sparse (and the dense) Gaussian mixture,
  scores heldout patches and draws ``elbo.png`` and ``clusters.png``;
- :func:`run_demo` does both on the two halves of a photograph shipped
  with matplotlib (no download);
- :func:`format_report` and :func:`format_patches_summary` turn the results
  into text for the command line.

They log with :mod:`logging` and never print.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.jobs.cluster import dask_client
from lsdask.jobs.wording import plural

logger = logging.getLogger(__name__)

__all__ = [
    "DEMO_BATCH_SIZE",
    "PATCH_ALPHA",
    "fit_and_report",
    "format_patches_summary",
    "format_report",
    "prepare_patches",
    "run_demo",
    "run_label",
]

#: Patches per batch for the demo. Each half of the sample photograph gives
#: 9,387 patches (8x8, stride 4), so this makes 4 nearly equal batches, which
#: keeps two workers busy with two batches per global update.
DEMO_BATCH_SIZE = 2350

#: Concentration of the cluster weights used by the demo and pipeline, as in
#: the paper's patch experiments (Sec. 4, alpha = 10).
PATCH_ALPHA = 10.0


def run_label(sparsity: int | None) -> str:
    """Legend label of a run: ``"L=4"`` or ``"dense"``."""
    return "dense" if sparsity is None else f"L={sparsity}"


def prepare_patches(
    images: Iterable[Any],
    out_dir: str | os.PathLike[str],
    *,
    patch_size: int = 8,
    stride: int = 4,
    batch_size: int = DEMO_BATCH_SIZE,
    heldout_fraction: float = 0.5,
    random_state: int = 0,
    max_images: int | None = None,
    progress: bool | None = False,
) -> dict[str, dict[str, Any]]:
    """Cut images into mean-removed patches in ``out_dir/{train,heldout}.zarr``.

    A thin wrapper of :func:`lsdask.io.patches.write_patch_store` (see there
    for the parameters) that logs what was written.

    Returns
    -------
    dict
        The summary of :func:`~lsdask.io.patches.write_patch_store`.
    """
    from lsdask.io.patches import write_patch_store

    summary = write_patch_store(
        images,
        out_dir,
        patch_size=patch_size,
        stride=stride,
        batch_size=batch_size,
        heldout_fraction=heldout_fraction,
        random_state=random_state,
        max_images=max_images,
        progress=progress,
    )
    logger.info(
        "patches: %d train (%d images), %d heldout (%d images) in %s",
        summary["train"]["n_patches"],
        summary["train"]["n_images"],
        summary["heldout"]["n_patches"],
        summary["heldout"]["n_images"],
        out_dir,
    )
    return summary


def _zarr_patch_size(X: Any) -> int | None:
    """The ``patch_size`` attribute of a Zarr array (or path to one), if any."""
    try:
        import zarr

        array = zarr.open_array(str(X), mode="r") if isinstance(X, str | os.PathLike) else X
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
    train: Any,
    out_dir: str | os.PathLike[str] | None,
    *,
    heldout: Any = None,
    n_components: int = 25,
    sparsity: int | None = 4,
    n_laps: int = 10,
    covariance_type: str = "zero-mean",
    algorithm: str = "memo",
    compare_dense: bool = True,
    alpha: float = PATCH_ALPHA,
    batch_size: int | None = None,
    random_state: int = 0,
    client: Any = "sync",
    n_workers: int | None = None,
    patch_size: int | None = None,
    n_top: int = 5,
    verbose: bool = False,
    progress: bool | None = False,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    batches_per_update: int | None = None,
) -> dict[str, Any]:
    """Fit an L-sparse (and the dense) Gaussian mixture, score heldout data, draw.

    Parameters
    ----------
    train : str, os.PathLike or array-like
        Training rows: a Zarr path or array, a dask or numpy array.
    out_dir : str, os.PathLike or None
        Folder for ``elbo.png`` and ``clusters.png``; None draws nothing.
    heldout : str, os.PathLike, array-like or None
        Heldout rows scored with :meth:`~lsdask.GaussianMixture.score` (mean
        log-likelihood per row); None or an empty array skips scoring.
    n_components : int, default 25
        K.
    sparsity : int or None, default 4
        L of the main run; None fits only the dense model.
    n_laps : int, default 10
        Maximum laps of each fit.
    covariance_type : {"zero-mean", "full", "diag"}, default "zero-mean"
    algorithm : {"memo", "svi", "vb"}, default "memo"
    compare_dense : bool, default True
        Also fit the dense model (``sparsity=None``) with the same seed,
        laps and batches.
    alpha : float, default 10
        Concentration of the cluster weights.
    batch_size : int or None, default None
        Rows per batch; None takes the Zarr chunks.
    random_state : int, default 0
        Seed of both fits.
    client : None, "sync", str or distributed.Client, default "sync"
        Where batch tasks run; None starts one LocalCluster shared by both
        fits (see :func:`lsdask.jobs.cluster.dask_client`).
    n_workers : int or None, default None
        Workers of that LocalCluster (default 2).
    patch_size : int or None, default None
        Side of the patches for ``clusters.png``; default the Zarr array's
        ``patch_size`` attribute, else ``sqrt(D)`` when D is a square. When
        the rows are not square patches, no cluster picture is drawn.
    n_top : int, default 5
        Cluster weights reported.
    verbose : bool, default False
        Log one line per lap.
    progress : bool or None, default False
        Progress bar per lap (None: only on a terminal).
    checkpoint_dir : path or None
        Checkpoint the fit there after every lap and when stopped (Ctrl-C,
        SIGTERM); one fit only, so not with ``compare_dense``.
    resume : bool
        Continue the latest checkpoint in ``checkpoint_dir``: an unfinished
        run goes on where it stopped, a finished one gets ``n_laps`` more laps.
    batches_per_update : int, optional
        Batches visited between global steps (default: the number of workers,
        1 in this process); the same seed gives the same model only with the
        same value, wherever it runs.

    Returns
    -------
    dict
        ``n_train``, ``n_heldout``, ``n_features``, ``n_components``,
        ``sparsity``, ``covariance_type``, ``algorithm``, ``runs`` (labels,
        main run first), per-run dicts keyed by label: ``laps``,
        ``converged``, ``seconds`` (wall time of ``fit``; when two runs are
        compared, both are timed after a tiny warm-up fit so that neither pays
        for loading the compiled kernels), ``heldout_score`` (None without heldout
        data), ``elbo_final``; ``heldout_diff_percent`` (L-sparse minus dense,
        relative to ``|dense|``, or None); ``speedup`` (dense seconds / sparse
        seconds, or None); ``top_weights`` and ``top_clusters`` of the main
        run; ``elbo_plot`` and ``clusters_plot`` (paths or None); ``models``
        (the fitted estimators, by label).

    Raises
    ------
    FileNotFoundError
        If a Zarr path does not exist.
    ValueError
        For invalid parameters or data.
    """
    from lsdask.estimators.gaussian import GaussianMixture
    from lsdask.io.sources import as_batch_source

    # Check both inputs before spending time on the cluster and the fit.
    train_source = as_batch_source(train, batch_size)
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
    if checkpoint_dir is not None and compare_dense and sparsity is not None:
        raise ValueError(
            "checkpoint_dir holds one fit; pass compare_dense=False to checkpoint the "
            "L-sparse one (or fit the dense model separately)"
        )

    sparsities: list[int | None] = [sparsity]
    if compare_dense and sparsity is not None:
        sparsities.append(None)
    result: dict[str, Any] = {
        "n_train": train_source.n_rows,
        "n_heldout": n_heldout,
        "n_features": train_source.n_features,
        "n_components": n_components,
        "sparsity": sparsity,
        "covariance_type": covariance_type,
        "algorithm": algorithm,
        "runs": [run_label(s) for s in sparsities],
        "laps": {},
        "converged": {},
        "seconds": {},
        "heldout_score": {},
        "elbo_final": {},
        "models": {},
    }
    with dask_client(client, n_workers) as shared:
        if len(sparsities) > 1:
            _warm_up(shared, train_source.n_features, covariance_type, algorithm, random_state)
        for s in sparsities:
            label = run_label(s)
            model = GaussianMixture(
                n_components,
                covariance_type=covariance_type,
                sparsity=s,
                algorithm=algorithm,
                n_laps=n_laps,
                batch_size=batch_size,
                alpha=alpha,
                random_state=random_state,
                client=shared,
                n_workers=n_workers,
                verbose=1 if verbose else 0,
                progress=progress,
                checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
                resume=resume,
                batches_per_update=batches_per_update,
            )
            logger.info("fitting %s: K=%d, %d laps at most", label, n_components, n_laps)
            start = time.perf_counter()
            model.fit(train)
            seconds = time.perf_counter() - start
            score = None if heldout is None else model.score(heldout)
            result["laps"][label] = int(model.n_laps_)
            result["converged"][label] = bool(model.converged_)
            result["seconds"][label] = seconds
            result["heldout_score"][label] = score
            result["elbo_final"][label] = float(model.elbo_trace_[-1])
            result["models"][label] = model
            logger.info(
                "%s: %d laps in %.1f s, final ELBO %.6g, heldout %s",
                label, model.n_laps_, seconds, model.elbo_trace_[-1], score,
            )  # fmt: skip

    main_label = result["runs"][0]
    main_model = result["models"][main_label]
    order = np.argsort(-main_model.weights_, kind="stable")[:n_top]
    result["top_clusters"] = [int(k) for k in order]
    result["top_weights"] = [float(main_model.weights_[k]) for k in order]
    result["heldout_diff_percent"] = None
    result["speedup"] = None
    if len(sparsities) == 2:
        sparse_score = result["heldout_score"][main_label]
        dense_score = result["heldout_score"]["dense"]
        if sparse_score is not None and dense_score:
            result["heldout_diff_percent"] = 100.0 * (sparse_score - dense_score) / abs(dense_score)
        if result["seconds"][main_label] > 0:
            result["speedup"] = result["seconds"]["dense"] / result["seconds"][main_label]

    result["elbo_plot"] = None
    result["clusters_plot"] = None
    if out_dir is not None:
        result.update(_draw(result, train, Path(out_dir), patch_size))
    return result


def _warm_up(
    client: Any, n_features: int, covariance_type: str, algorithm: str, random_state: int
) -> None:
    """Run tiny sparse and dense fits so that neither timed fit pays for start-up.

    The first fit in a fresh process (the driver, or a new Dask worker) loads
    the compiled kernels; without this the first of the compared runs would
    look seconds slower than the second.
    """
    from lsdask.estimators.gaussian import GaussianMixture

    start = time.perf_counter()
    X = np.random.default_rng(random_state).normal(size=(512, n_features))
    for s in (1, None):
        GaussianMixture(
            2,
            covariance_type=covariance_type,
            sparsity=s,
            algorithm=algorithm,
            n_laps=1,
            batch_size=64,
            random_state=random_state,
            client=client,
            progress=False,
        ).fit(X)
    logger.info("warm-up fits took %.1f s", time.perf_counter() - start)


def _heldout_shape(X: Any) -> tuple[int, int]:
    """(rows, features) of a Zarr path/array, dask or numpy array, without reading the data."""
    if isinstance(X, str | os.PathLike):
        import zarr

        try:
            shape = zarr.open_array(str(X), mode="r").shape
        except Exception as exc:
            raise ValueError(f"heldout: {str(X)!r} is not a readable Zarr array: {exc}") from exc
    else:
        shape = getattr(X, "shape", None)
        if shape is None:
            shape = np.asarray(X).shape
    if len(shape) != 2:
        raise ValueError(f"heldout must be 2-D (rows, features); got shape {tuple(shape)}")
    return int(shape[0]), int(shape[1])


def _draw(result: dict[str, Any], train: Any, out_dir: Path, patch_size: int | None) -> dict:
    """Write ``elbo.png`` and (for square patches) ``clusters.png`` into ``out_dir``."""
    from lsdask.plotting import plot_covariance_eigenvectors, plot_elbo_trace

    out_dir.mkdir(parents=True, exist_ok=True)
    n_train = max(result["n_train"], 1)
    traces = {
        label: (model.lap_trace_, model.elbo_trace_ / n_train)
        for label, model in result["models"].items()
    }
    title = (
        f"{result['covariance_type']} GMM, K={result['n_components']}, "
        f"{result['algorithm']}, {result['n_train']:,} rows"
    )
    elbo_png = plot_elbo_trace(
        traces, out_dir / "elbo.png", title=title, ylabel="ELBO per training row"
    )
    paths: dict[str, Any] = {"elbo_plot": str(elbo_png), "clusters_plot": None}
    model = result["models"][result["runs"][0]]
    side = _patch_side(train, result["n_features"], patch_size)
    covariances = np.asarray(model.covariances_)
    if covariances.ndim == 2:  # "diag": (K, D) variances
        covariances = np.stack([np.diag(v) for v in covariances])
    if side is None:
        logger.info(
            "rows have %d features, not square patches: no clusters.png", result["n_features"]
        )
    else:
        paths["clusters_plot"] = str(
            plot_covariance_eigenvectors(
                covariances, model.weights_, out_dir / "clusters.png", patch_size=side
            )
        )
    return paths


def run_demo(
    out_dir: str | os.PathLike[str] = "lsdask-demo",
    *,
    n_components: int = 25,
    sparsity: int | None = 4,
    n_laps: int = 10,
    client: Any = None,
    n_workers: int | None = None,
    random_state: int = 0,
    batch_size: int = DEMO_BATCH_SIZE,
    verbose: bool = False,
    progress: bool | None = False,
) -> dict[str, Any]:
    """The demo: patch GMM on a sample photograph, L-sparse vs dense.

    Cuts the two halves of matplotlib's ``grace_hopper.jpg`` (installed with
    matplotlib; no network) into 8x8 mean-removed patches with stride 4, one
    half for training and one held out, in ``out_dir/patches``; then runs
    :func:`fit_and_report` with the pictures in ``out_dir``.

    Parameters
    ----------
    out_dir : str or os.PathLike, default "lsdask-demo"
    n_components, sparsity, n_laps, client, n_workers, random_state, batch_size
        See :func:`fit_and_report`; ``client=None`` (default) starts a
        LocalCluster of ``n_workers`` (default 2) processes.
    verbose : bool, default False
    progress : bool or None, default False

    Returns
    -------
    dict
        :func:`fit_and_report`'s result, plus ``patches`` (the store summary).
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
    result = fit_and_report(
        summary["train"]["path"],
        out_dir,
        heldout=summary["heldout"]["path"],
        n_components=n_components,
        sparsity=sparsity,
        n_laps=n_laps,
        random_state=random_state,
        client=client,
        n_workers=n_workers,
        verbose=verbose,
        progress=progress,
    )
    result["patches"] = summary
    return result


def format_report(result: dict[str, Any], *, title: str | None = None) -> str:
    """Readable multi-line summary of a :func:`fit_and_report` result."""
    lines = []
    if title:
        lines.append(title)
    patches = result.get("patches")
    if patches:
        lines.append(
            f"data: {patches['train']['n_patches']:,} train patches "
            f"({plural(patches['train']['n_images'], 'image')}), "
            f"{patches['heldout']['n_patches']:,} heldout patches "
            f"({plural(patches['heldout']['n_images'], 'image')}), D={result['n_features']}"
        )
        lines.append(f"      store: {Path(patches['train']['path']).parent}")
    else:
        lines.append(
            f"data: {result['n_train']:,} train rows, {result['n_heldout']:,} heldout rows, "
            f"D={result['n_features']}"
        )
    sparsity = result["sparsity"]
    lines.append(
        f"model: {result['covariance_type']} Gaussian mixture, K={result['n_components']}, "
        f"L={sparsity if sparsity is not None else 'dense'}, algorithm={result['algorithm']}"
    )
    lines.append("")
    header = f"{'run':<8} {'laps':>4} {'conv':>4} {'seconds':>8} {'heldout loglik/row':>19} "
    lines.append(header + f"{'final ELBO':>16} {'per row':>10}")
    n_train = max(result["n_train"], 1)
    for label in result["runs"]:
        score = result["heldout_score"][label]
        elbo = result["elbo_final"][label]
        lines.append(
            f"{label:<8} {result['laps'][label]:>4} "
            f"{'yes' if result['converged'][label] else 'no':>4} "
            f"{result['seconds'][label]:>8.1f} "
            f"{'n/a' if score is None else f'{score:.4f}':>19} "
            f"{elbo:>16.1f} {elbo / n_train:>10.4f}"
        )
    lines.append("")
    main_label = result["runs"][0]
    if result.get("heldout_diff_percent") is not None:
        lines.append(
            f"heldout log-likelihood per patch, {main_label} vs dense: "
            f"{result['heldout_score'][main_label]:.4f} vs {result['heldout_score']['dense']:.4f} "
            f"({result['heldout_diff_percent']:+.2g} %, nats per patch)"
        )
    elif result["n_heldout"] == 0:
        lines.append("heldout log-likelihood: no heldout data")
    else:
        lines.append(
            f"heldout log-likelihood per patch, {main_label}: "
            f"{result['heldout_score'][main_label]:.4f}"
        )
    if result.get("speedup") is not None:
        lines.append(f"fit time dense / {main_label}: {result['speedup']:.2f}x")
    weights = ", ".join(
        f"k={k}: {w:.3f}"
        for k, w in zip(result["top_clusters"], result["top_weights"], strict=True)
    )
    lines.append(f"heaviest {len(result['top_weights'])} clusters ({main_label}): {weights}")
    elbo = result["elbo_final"][main_label]
    lines.append(f"final ELBO ({main_label}): {elbo:.1f} ({elbo / n_train:.4f} per row)")
    pictures = [p for p in (result.get("elbo_plot"), result.get("clusters_plot")) if p]
    if pictures:
        lines.append("pictures: " + ", ".join(pictures))
    return "\n".join(lines)


def format_patches_summary(summary: dict[str, dict[str, Any]]) -> str:
    """One line per split of a :func:`prepare_patches` summary."""
    return "\n".join(
        f"{split:<8} {summary[split]['n_patches']:>10,} patches from "
        f"{plural(summary[split]['n_images'], 'image')}: {summary[split]['path']}"
        for split in ("train", "heldout")
    )
