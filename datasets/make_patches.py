"""Cut image folders into 8x8 mean-removed patches stored as train/heldout Zarr arrays.

Example (BSDS500, 500 JPEGs of 481 x 321, about 9.4k patches per image)::

    python datasets/make_patches.py ../shared/data/bsds500/train \\
        ../shared/data/bsds500/val ../shared/data/bsds500/test --out data/bsds_patches

With ``--sample-images`` instead of folders, the two photographs shipped in
the scikit-learn wheel are used, which needs no download.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

try:
    from lsdask.io import patches
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lsdask.io import patches


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of this script."""
    parser = argparse.ArgumentParser(
        description=(
            "Cut images into square grayscale patches with their own mean removed "
            "(Hughes & Sudderth, Sec. 4) and write OUT/train.zarr and OUT/heldout.zarr, "
            "split by image."
        ),
    )
    parser.add_argument(
        "image_dirs",
        nargs="*",
        type=Path,
        metavar="IMAGE_DIR",
        help="folders searched recursively for .jpg, .jpeg and .png files",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="output folder (replaced atomically)"
    )
    parser.add_argument("--patch-size", type=int, default=8, help="patch side in pixels")
    parser.add_argument("--stride", type=int, default=4, help="step between patches in pixels")
    parser.add_argument(
        "--batch-size", type=int, default=36816, help="patches per Zarr chunk (one minibatch)"
    )
    parser.add_argument(
        "--heldout-fraction", type=float, default=0.1, help="fraction of images held out"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/heldout split")
    parser.add_argument("--max-images", type=int, default=None, help="use only the first N images")
    parser.add_argument(
        "--sample-images",
        action="store_true",
        help="use the two sample images shipped with scikit-learn instead of folders",
    )
    parser.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the script; return the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    if args.sample_images == bool(args.image_dirs):
        parser.error("give one or more IMAGE_DIR folders, or --sample-images (not both)")
    try:
        if args.sample_images:
            images: list = patches.sample_images()
        else:
            images = [path for folder in args.image_dirs for path in patches.find_images(folder)]
        summary = patches.write_patch_store(
            images,
            args.out,
            patch_size=args.patch_size,
            stride=args.stride,
            batch_size=args.batch_size,
            heldout_fraction=args.heldout_fraction,
            random_state=args.seed,
            max_images=args.max_images,
            progress=False if args.no_progress else None,
        )
    except ValueError as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
