"""The BSDS500 patch stores of the mixture benchmark, and samples of their rows.

``datasets/make_patches.py`` cuts the 500 BSDS500 images into mean-removed 8x8
patches: ``train.zarr`` (about 4.23M patches from 450 images) and
``heldout.zarr`` (about 0.47M from the 50 others), Zarr chunks of
``CHUNK_ROWS`` rows = one minibatch (lsparse Sec. 4).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from harness import REPO, SHARED_DATA
from harness.run import log

BSDS_DIR = SHARED_DATA / "bsds500"
CHUNK_ROWS = 36_816  # one Zarr chunk = one minibatch
PATCH_DIR = REPO / "data" / "bsds_patches"


def blocks(n: int, size: int) -> list[slice]:
    """Consecutive slices of at most ``size`` rows covering ``n`` rows."""
    return [slice(s, min(s + size, n)) for s in range(0, n, size)]


def ensure_patches(patch_dir: Path) -> None:
    """Make the BSDS500 train/heldout Zarr stores if they are missing (~15 s)."""
    if (patch_dir / "train.zarr").exists() and (patch_dir / "heldout.zarr").exists():
        return
    log(f"making BSDS500 patches in {patch_dir}")
    splits = [str(BSDS_DIR / s) for s in ("train", "val", "test")]
    cmd = [sys.executable, str(REPO / "datasets/make_patches.py"), *splits]
    subprocess.run([*cmd, "--out", str(patch_dir), "--no-progress"], check=True, cwd=REPO)


def prefix_store(train: Path, n_chunks: int, out_dir: Path) -> tuple[str, int]:
    """A Zarr store holding the first ``n_chunks`` chunks of ``train``; (path, rows)."""
    import zarr

    src = zarr.open_array(str(train), mode="r")
    chunk = int(src.chunks[0])
    n_rows = min(n_chunks * chunk, src.shape[0])
    path = out_dir / f"train_{n_chunks}chunks.zarr"
    if path.exists():
        dst = zarr.open_array(str(path), mode="r")
        if dst.shape == (n_rows, src.shape[1]) and int(dst.chunks[0]) == chunk:
            return str(path), n_rows
    dst = zarr.create_array(
        store=str(path),
        shape=(n_rows, src.shape[1]),
        chunks=(chunk, src.shape[1]),
        dtype=src.dtype,
        zarr_format=3,
        fill_value=0.0,
        overwrite=True,
    )
    for sl in blocks(n_rows, chunk):
        dst[sl] = src[sl]
    return str(path), n_rows


def random_rows(store: str | Path, n: int, seed: int) -> np.ndarray:
    """``n`` rows drawn without replacement (sorted), as float64."""
    import zarr

    arr = zarr.open_array(str(store), mode="r")[:]
    rng = np.random.default_rng(seed)
    if n < arr.shape[0]:
        arr = arr[np.sort(rng.choice(arr.shape[0], size=n, replace=False))]
    return np.ascontiguousarray(arr, dtype=np.float64)
