"""Patch GMM (Hughes & Sudderth, Sec. 4): images -> Zarr patches -> L-sparse vs dense GMM.

The steps (patches, fits, heldout scores, pictures) are the library's
:func:`lsdask.jobs.patches.prepare_patches` and
:func:`lsdask.jobs.patch_gmm.fit_and_report`;
this file only turns image folders into a list of images, builds the model
and parses the command line.

Examples
--------
On the two halves of matplotlib's sample photograph (no download), in-process::

    python pipelines/patch_gmm.py --out runs/patch_gmm --sync

On BSDS500 (about 3.6 M patches from 400 images, as in the paper), on a local
Dask cluster of 4 workers::

    python pipelines/patch_gmm.py ../shared/data/bsds500/train ../shared/data/bsds500/test \\
        --out runs/bsds --components 200 --sparsity 16 --laps 5 --workers 4
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

try:
    import lsdask  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lsdask.cli.options import add_execution, add_verbose, client_from_args
from lsdask.estimators.gaussian import GaussianMixture
from lsdask.io.patches import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_PATCH_SIZE,
    DEFAULT_STRIDE,
    find_images,
    sample_images,
)
from lsdask.jobs.patch_gmm import PATCH_ALPHA, PatchFitReport, fit_and_report, format_report
from lsdask.jobs.patches import DEMO_BATCH_SIZE, prepare_patches

logger = logging.getLogger(__name__)

#: Patches per minibatch for image folders: the paper's 36,816 (Sec. 4).
FOLDER_BATCH_SIZE = DEFAULT_BATCH_SIZE


def _resolve_images(images: Any) -> tuple[list[Any], bool]:
    """Turn ``images`` into a list of image paths or arrays.

    Returns the list and whether it is the sample photograph's two halves.
    """
    if images is None:
        return sample_images(), True
    if isinstance(images, str | os.PathLike):
        return list(find_images(images)), False
    if isinstance(images, np.ndarray):
        raise TypeError(
            "images must be None, a folder, a list of folders, or a list of image paths or "
            "arrays; got a single numpy array: wrap it in a list"
        )
    resolved: list[Any] = []
    for item in images:
        if isinstance(item, str | os.PathLike) and Path(item).is_dir():
            resolved.extend(find_images(item))
        else:
            resolved.append(item)
    if not resolved:
        raise ValueError("images is empty; pass a folder, image paths or image arrays")
    return resolved, False


@dataclass
class PatchGmmRun:
    """What :func:`run_patch_gmm` did: the fit's report (with the patch store's
    summary in ``fit.patches``) and the seconds it took to cut the patches."""

    fit: PatchFitReport
    patch_seconds: float


def run_patch_gmm(
    images: Any = None,
    out_dir: str | os.PathLike[str] = "runs/patch_gmm",
    model: GaussianMixture | None = None,
    *,
    compare_dense: bool = True,
    random_state: int = 0,
    max_images: int | None = None,
    batch_size: int | None = None,
    heldout_fraction: float | None = None,
    patch_size: int = DEFAULT_PATCH_SIZE,
    stride: int = DEFAULT_STRIDE,
    progress: bool | None = False,
) -> PatchGmmRun:
    """Run the patch-GMM experiment and return what it learned.

    Parameters
    ----------
    images : None, folder, or sequence of folders / image paths / image arrays
        None uses the two halves of matplotlib's sample photograph (one trains,
        one is held out). Folders are searched recursively for JPEG and PNG files.
    out_dir : str or os.PathLike
        Output folder: ``patches/{train,heldout}.zarr``, ``elbo.png`` (ELBO
        traces of both runs) and ``clusters.png`` (eigenvector tiles of the
        L-sparse model).
    model : lsdask.GaussianMixture or None
        The model to fit (:func:`lsdask.jobs.patch_gmm.fit_and_report`); None:
        the paper's, ``GaussianMixture(25, sparsity=4, alpha=PATCH_ALPHA)``
        seeded with ``random_state``, in this process.
    compare_dense : bool, default True
        Also fit the dense model with the same seed, laps and batches.
    random_state : int, default 0
        Seed of the train/heldout split (and of the default model).
    max_images : int or None, default None
        Use only the first ``max_images`` images.
    batch_size : int or None, default None
        Patches per minibatch (Zarr chunk); default 2,350 for the sample
        photos (4 batches each), 36,816 (the paper's) otherwise.
    heldout_fraction : float or None, default None
        Fraction of images held out; default 0.5 for the sample photos, 0.1
        otherwise.
    patch_size, stride : int, default 8, 4
        Patch geometry.
    progress : bool or None, default False
        Progress bars of the patches and the default model (None: only on a
        terminal).

    Returns
    -------
    PatchGmmRun
    """
    if model is None:
        model = GaussianMixture(
            25, sparsity=4, alpha=PATCH_ALPHA, random_state=random_state, client="sync",
            progress=progress,
        )  # fmt: skip
    items, is_sample = _resolve_images(images)
    if batch_size is None:
        batch_size = DEMO_BATCH_SIZE if is_sample else FOLDER_BATCH_SIZE
    if heldout_fraction is None:
        heldout_fraction = 0.5 if is_sample else 0.1
    out_dir = Path(out_dir)
    logger.info("patch GMM: %d images -> %s", len(items), out_dir)

    start = time.perf_counter()
    summary = prepare_patches(
        items,
        out_dir / "patches",
        patch_size=patch_size,
        stride=stride,
        batch_size=batch_size,
        heldout_fraction=heldout_fraction,
        random_state=random_state,
        max_images=max_images,
        progress=progress,
    )
    patch_seconds = time.perf_counter() - start
    report = fit_and_report(
        model,
        summary.train.path,
        out_dir=out_dir,
        heldout=summary.heldout.path if summary.heldout.n_patches else None,
        compare_dense=compare_dense,
        patch_size=patch_size,
    )
    report.patches = summary
    return PatchGmmRun(report, patch_seconds)


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of this script."""
    parser = argparse.ArgumentParser(
        description=(
            "Patch GMM (Hughes & Sudderth, Sec. 4): cut images into 8x8 mean-removed patches, "
            "fit an L-sparse and a dense zero-mean Gaussian mixture, score heldout patches and "
            "draw the ELBO traces and cluster eigenvectors."
        ),
    )
    parser.add_argument(
        "image_dirs", nargs="*", type=Path, metavar="IMAGE_DIR",
        help="folders of .jpg/.jpeg/.png images (default: matplotlib's sample photograph)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("runs/patch_gmm"), help="output folder")
    parser.add_argument("--components", type=int, default=25, help="K (default 25)")
    parser.add_argument("--sparsity", type=int, default=4, help="L (default 4; 0 = dense only)")
    parser.add_argument("--laps", type=int, default=10, help="maximum laps (default 10)")
    parser.add_argument("--covariance", choices=("zero-mean", "full", "diag"), default="zero-mean")
    parser.add_argument("--no-dense", action="store_true", help="skip the dense comparison run")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--max-images", type=int, help="use only the first N images")
    parser.add_argument("--batch-size", type=int, help="patches per minibatch")
    parser.add_argument("--heldout-fraction", type=float, help="fraction of images held out")
    add_execution(parser, scheduler=True)
    add_verbose(parser, False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the pipeline from the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    client, n_workers = client_from_args(args)
    model = GaussianMixture(
        args.components,
        sparsity=args.sparsity or None,
        n_laps=args.laps,
        covariance_type=args.covariance,
        alpha=PATCH_ALPHA,
        random_state=args.seed,
        client=client,
        n_workers=n_workers,
        verbose=1 if args.verbose else 0,
        progress=None,
    )
    start = time.perf_counter()
    try:
        result = run_patch_gmm(
            [*args.image_dirs] or None,
            args.out,
            model,
            compare_dense=not args.no_dense,
            random_state=args.seed,
            max_images=args.max_images,
            batch_size=args.batch_size,
            heldout_fraction=args.heldout_fraction,
            progress=None,
        )
    except (ValueError, FileNotFoundError, TypeError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    print(format_report(result.fit, title="patch GMM (Hughes & Sudderth, Sec. 4)"))
    print(f"patches written in {result.patch_seconds:.1f} s")
    print(f"total time: {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
