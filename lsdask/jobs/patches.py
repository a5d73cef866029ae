"""The patches job: images cut into mean-removed patches in train/heldout Zarr arrays.

``lsdask patches``, the demo (:func:`lsdask.jobs.patch_gmm.run_demo`) and
``pipelines/patch_gmm.py`` cut their patches with :func:`prepare_patches`,
which returns a :class:`PatchStoreSummary`; :func:`format_patches_summary`
is its text for the command line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsdask.io.patches import DEFAULT_PATCH_SIZE, DEFAULT_STRIDE, write_patch_store
from lsdask.jobs.wording import plural

logger = logging.getLogger(__name__)

__all__ = [
    "DEMO_BATCH_SIZE",
    "PatchSplit",
    "PatchStoreSummary",
    "format_patches_summary",
    "prepare_patches",
]

#: Patches per batch for the demo. Each half of the sample photograph gives
#: 9,387 patches (8x8, stride 4), so this makes 4 nearly equal batches, which
#: keeps two workers busy with two batches per global update.
DEMO_BATCH_SIZE = 2350


@dataclass(frozen=True)
class PatchSplit:
    """One array of a patch store: its ``path``, its ``n_patches`` rows and the
    ``n_images`` they were cut from."""

    path: str
    n_patches: int
    n_images: int


@dataclass(frozen=True)
class PatchStoreSummary:
    """What :func:`prepare_patches` wrote: the ``train`` and ``heldout`` arrays."""

    train: PatchSplit
    heldout: PatchSplit

    @property
    def folder(self) -> Path:
        """The store: the folder holding both arrays."""
        return Path(self.train.path).parent

    @classmethod
    def from_mapping(cls, summary: dict[str, dict[str, Any]]) -> PatchStoreSummary:
        """The summary of :func:`lsdask.io.patches.write_patch_store` (a dict by split)."""
        return cls(
            **{
                split: PatchSplit(
                    path=str(summary[split]["path"]),
                    n_patches=int(summary[split]["n_patches"]),
                    n_images=int(summary[split]["n_images"]),
                )
                for split in ("train", "heldout")
            }
        )


def prepare_patches(
    images: Iterable[Any],
    out_dir: str | os.PathLike[str],
    *,
    patch_size: int = DEFAULT_PATCH_SIZE,
    stride: int = DEFAULT_STRIDE,
    batch_size: int = DEMO_BATCH_SIZE,
    heldout_fraction: float = 0.5,
    random_state: int = 0,
    max_images: int | None = None,
    progress: bool | None = False,
) -> PatchStoreSummary:
    """Cut images into mean-removed patches in ``out_dir/{train,heldout}.zarr``.

    A thin wrapper of :func:`lsdask.io.patches.write_patch_store` (see there
    for the parameters) that logs what was written.

    Returns
    -------
    PatchStoreSummary
    """
    summary = PatchStoreSummary.from_mapping(
        write_patch_store(
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
    )
    logger.info(
        "patches: %d train (%d images), %d heldout (%d images) in %s",
        summary.train.n_patches,
        summary.train.n_images,
        summary.heldout.n_patches,
        summary.heldout.n_images,
        out_dir,
    )
    return summary


def format_patches_summary(summary: PatchStoreSummary) -> str:
    """One line per split of a :func:`prepare_patches` summary."""
    return "\n".join(
        f"{name:<8} {split.n_patches:>10,} patches from "
        f"{plural(split.n_images, 'image')}: {split.path}"
        for name, split in (("train", summary.train), ("heldout", summary.heldout))
    )
