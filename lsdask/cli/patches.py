"""``lsdask patches``: image folders cut into train/heldout Zarr arrays of patches."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lsdask.cli.options import add_verbose, out_path
from lsdask.io.patches import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_PATCH_SIZE,
    DEFAULT_STRIDE,
    find_images,
)
from lsdask.jobs import commit
from lsdask.jobs.patches import format_patches_summary, prepare_patches
from lsdask.validation import parse_positive_int

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    patches = sub.add_parser(
        "patches",
        help="cut image folders into patches in train/heldout Zarr arrays",
        description=(
            "Cut images into square grayscale patches with their own mean removed "
            "(Hughes & Sudderth, Sec. 4) and write OUT/train.zarr and OUT/heldout.zarr, "
            "split by image."
        ),
    )
    patches.add_argument(
        "image_dirs", nargs="+", type=Path, metavar="IMAGE_DIR",
        help="folders searched recursively for .jpg, .jpeg and .png files (pooled: a random "
        "--heldout-fraction of all their images is held out)",
    )  # fmt: skip
    patches.add_argument(
        "--out", type=out_path, required=True,
        help="output folder: new, empty, or a previous patch store (replaced when done)",
    )  # fmt: skip
    patches.add_argument(
        "--patch-size", type=parse_positive_int, default=DEFAULT_PATCH_SIZE, help="patch side"
    )
    patches.add_argument(
        "--stride", type=parse_positive_int, default=DEFAULT_STRIDE, help="step between patches"
    )
    patches.add_argument(
        "--batch-size", type=parse_positive_int, default=DEFAULT_BATCH_SIZE,
        help="patches per Zarr chunk",
    )  # fmt: skip
    patches.add_argument(
        "--heldout-fraction", type=float, default=0.1, help="fraction of images held out"
    )
    patches.add_argument("--seed", type=int, default=0, help="seed of the train/heldout split")
    patches.add_argument(
        "--max-images", type=parse_positive_int, help="use only the first N images"
    )
    add_verbose(patches, argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    images = [path for folder in args.image_dirs for path in find_images(folder)]
    summary = prepare_patches(
        images,
        args.out,
        patch_size=args.patch_size,
        stride=args.stride,
        batch_size=args.batch_size,
        heldout_fraction=args.heldout_fraction,
        random_state=args.seed,
        max_images=args.max_images,
        progress=None,
    )
    commit.committed(f"the patches in {args.out}")
    print(format_patches_summary(summary))
    return 0
