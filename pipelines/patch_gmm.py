"""Patch GMM (Hughes & Sudderth, Sec. 4): images -> Zarr patches -> L-sparse vs dense GMM.

The steps (patches, fits, heldout scores, pictures) are the library's
:func:`lsdask.jobs.patch_gmm.prepare_patches` and
:func:`lsdask.jobs.patch_gmm.fit_and_report`;
this file only turns image folders into a list of images and parses the
command line.

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
from pathlib import Path
from typing import Any

import numpy as np

try:
    from lsdask.io.patches import find_images, sample_images
    from lsdask.jobs.patch_gmm import (
        DEMO_BATCH_SIZE,
        fit_and_report,
        format_report,
        prepare_patches,
    )
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lsdask.io.patches import find_images, sample_images
    from lsdask.jobs.patch_gmm import (
        DEMO_BATCH_SIZE,
        fit_and_report,
        format_report,
        prepare_patches,
    )

logger = logging.getLogger(__name__)

#: Patches per minibatch for image folders: the paper's 36,816 (Sec. 4).
FOLDER_BATCH_SIZE = 36816


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


def run_patch_gmm(
    images: Any = None,
    out_dir: str | os.PathLike[str] = "runs/patch_gmm",
    *,
    n_components: int = 25,
    sparsity: int | None = 4,
    n_laps: int = 10,
    covariance_type: str = "zero-mean",
    compare_dense: bool = True,
    random_state: int = 0,
    client: Any = "sync",
    n_workers: int | None = None,
    max_images: int | None = None,
    batch_size: int | None = None,
    heldout_fraction: float | None = None,
    patch_size: int = 8,
    stride: int = 4,
    verbose: bool = False,
    progress: bool | None = False,
) -> dict[str, Any]:
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
    n_components : int, default 25
        K.
    sparsity : int or None, default 4
        L; None fits only the dense model.
    n_laps : int, default 10
        Maximum laps of each fit.
    covariance_type : {"zero-mean", "full", "diag"}, default "zero-mean"
    compare_dense : bool, default True
        Also fit the dense model with the same seed, laps and batches.
    random_state : int, default 0
        Seed of the train/heldout split and of both fits.
    client : None, "sync", str or distributed.Client, default "sync"
        Where batch tasks run; None starts a LocalCluster of ``n_workers``
        (default 2) processes shared by both fits; a string other than
        "sync" is a scheduler address.
    n_workers : int or None, default None
    max_images : int or None, default None
        Use only the first ``max_images`` images.
    batch_size : int or None, default None
        Patches per minibatch (Zarr chunk); default 4,200 for the sample
        photos (4 batches each), 36,816 (the paper's) otherwise.
    heldout_fraction : float or None, default None
        Fraction of images held out; default 0.5 for the sample photos, 0.1
        otherwise.
    patch_size, stride : int, default 8, 4
        Patch geometry.
    verbose : bool, default False
        Log one line per lap.
    progress : bool or None, default False
        Progress bars (None: only on a terminal).

    Returns
    -------
    dict
        :func:`lsdask.jobs.patch_gmm.fit_and_report`'s result (``n_train``,
        ``n_heldout``, ``n_components``, ``sparsity``, ``laps``,
        ``seconds``, ``heldout_score``, ``elbo_final`` per run,
        ``heldout_diff_percent``, ``top_weights``, ``elbo_plot``,
        ``clusters_plot``, ``models``) plus ``patches`` (the store summary)
        and ``patch_seconds``.
    """
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
    result = fit_and_report(
        summary["train"]["path"],
        out_dir,
        heldout=summary["heldout"]["path"] if summary["heldout"]["n_patches"] else None,
        n_components=n_components,
        sparsity=sparsity,
        n_laps=n_laps,
        covariance_type=covariance_type,
        compare_dense=compare_dense,
        random_state=random_state,
        client=client,
        n_workers=n_workers,
        patch_size=patch_size,
        verbose=verbose,
        progress=progress,
    )
    result["patches"] = summary
    result["patch_seconds"] = patch_seconds
    return result


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
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address")
    group.add_argument("--workers", type=int, help="worker processes of a local Dask cluster")
    group.add_argument("--sync", action="store_true", help="run in this process, without Dask")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO)")
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
    client: Any = "sync" if args.sync else args.scheduler
    start = time.perf_counter()
    try:
        result = run_patch_gmm(
            [*args.image_dirs] or None,
            args.out,
            n_components=args.components,
            sparsity=args.sparsity or None,
            n_laps=args.laps,
            covariance_type=args.covariance,
            compare_dense=not args.no_dense,
            random_state=args.seed,
            client=client,
            n_workers=args.workers,
            max_images=args.max_images,
            batch_size=args.batch_size,
            heldout_fraction=args.heldout_fraction,
            verbose=args.verbose,
            progress=None,
        )
    except (ValueError, FileNotFoundError, TypeError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    print(format_report(result, title="patch GMM (Hughes & Sudderth, Sec. 4)"))
    print(f"patches written in {result['patch_seconds']:.1f} s")
    print(f"total time: {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
