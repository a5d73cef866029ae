"""Image patches for clustering experiments, written to chunked Zarr arrays.

Following Hughes & Sudderth, "Fast learning of clusters and topics via sparse
posteriors" (Sec. 4), every image is converted to grayscale and cut into
overlapping ``8 x 8`` patches with stride 4. Each patch is flattened to a
64-vector and its own mean is subtracted, so the data describe local texture
and edges rather than brightness.

The store layout produced by :func:`write_patch_store` is::

    out_dir/
        train.zarr     # float32, shape (N_train, patch_size**2)
        heldout.zarr   # float32, shape (N_heldout, patch_size**2)

Both arrays are Zarr v3 with chunks ``(batch_size, patch_size**2)``, so one
chunk of rows is exactly one minibatch. Images (not patches) are split between
the two arrays, which keeps held-out patches from overlapping training ones.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import json
import logging
import math
import os
import stat
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from lsdask.errors import DataError, one_line
from lsdask.io import fsops, guarded
from lsdask.io.atomic import remove_tree, replace_dir, temp_sibling

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_PATCH_SIZE",
    "DEFAULT_STRIDE",
    "IMAGE_SUFFIXES",
    "INTEGRITY_ATTR",
    "LUMA_WEIGHTS",
    "MAX_CHUNK_BYTES",
    "ZSTD_LEVEL",
    "extract_patches",
    "find_images",
    "load_image",
    "open_checked_array",
    "read_rows",
    "sample_images",
    "to_grayscale",
    "write_patch_store",
]

#: Side of the square patches, in pixels (the paper's 8 x 8, Sec. 4).
DEFAULT_PATCH_SIZE = 8

#: Step between neighbouring patches, in pixels (the paper's 4, Sec. 4).
DEFAULT_STRIDE = 4

#: Rows per Zarr chunk, i.e. patches per minibatch (the paper's 36,816, Sec. 4).
DEFAULT_BATCH_SIZE = 36816

#: ITU-R BT.601 luma weights for the red, green and blue channels.
LUMA_WEIGHTS: tuple[float, float, float] = (0.299, 0.587, 0.114)

#: File suffixes (lower case) picked up by :func:`find_images`.
IMAGE_SUFFIXES: frozenset[str] = frozenset({".jpg", ".jpeg", ".png"})

_LOG_EVERY = 50


def to_grayscale(image: np.ndarray) -> np.ndarray:
    """Convert an image to a 2-D float32 grayscale array.

    Parameters
    ----------
    image : numpy.ndarray
        Either a 2-D gray image ``(H, W)`` or a 3-D image ``(H, W, C)`` with
        ``C`` in {1, 3, 4} (gray, RGB, RGBA; the alpha channel is ignored).
        Integer images are scaled to [0, 1] by the maximum of their dtype
        (255 for uint8); floating images are taken as they are.

    Returns
    -------
    numpy.ndarray
        float32 array of shape ``(H, W)``. For RGB input it is
        ``0.299 R + 0.587 G + 0.114 B`` (ITU-R BT.601 luma).

    Raises
    ------
    ValueError
        If the image is not 2-D or 3-D, or has an unsupported number of channels.
    """
    arr = np.asarray(image)
    if arr.ndim not in (2, 3):
        raise ValueError(
            f"image must be a 2-D (H, W) gray or 3-D (H, W, C) color array, "
            f"got an array with ndim={arr.ndim} and shape {arr.shape}; "
            "pass a single image, not a batch of images."
        )
    if np.issubdtype(arr.dtype, np.integer):
        scale = float(np.iinfo(arr.dtype).max)
        arr = arr.astype(np.float32) / np.float32(scale)
    elif arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float32, copy=False)
    else:
        raise ValueError(
            f"image must have an integer or floating dtype, got dtype {arr.dtype}; "
            "convert it with numpy.asarray(image, dtype=numpy.float32) first."
        )
    if arr.ndim == 2:
        return arr
    n_channels = arr.shape[2]
    if n_channels == 1:
        return np.ascontiguousarray(arr[:, :, 0])
    if n_channels in (3, 4):
        weights = np.asarray(LUMA_WEIGHTS, dtype=np.float32)
        return np.ascontiguousarray(arr[:, :, :3] @ weights, dtype=np.float32)
    raise ValueError(
        f"a 3-D image must have 1 (gray), 3 (RGB) or 4 (RGBA) channels in its last axis, "
        f"got shape {arr.shape} with {n_channels} channels; "
        "if the channels come first, move them last with numpy.moveaxis(image, 0, -1)."
    )


def _check_positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an int, raising a ValueError if it is not an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(
            f"{name} must be an integer >= 1, got {value!r} of type {type(value).__name__}; "
            f"pass a positive whole number for {name}."
        )
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value}; pass {name}=1 or larger.")
    return int(value)


def extract_patches(
    image: np.ndarray,
    patch_size: int = DEFAULT_PATCH_SIZE,
    stride: int = DEFAULT_STRIDE,
    remove_mean: bool = True,
) -> np.ndarray:
    """Cut an image into flattened, optionally mean-removed square patches.

    Parameters
    ----------
    image : numpy.ndarray
        Gray ``(H, W)`` or color ``(H, W, C)`` image; it is converted with
        :func:`to_grayscale` first.
    patch_size : int, default 8
        Side length of each square patch, in pixels.
    stride : int, default 4
        Step between the top-left corners of neighbouring patches, in pixels,
        both down and across.
    remove_mean : bool, default True
        Subtract from each patch the mean of its own pixels.

    Returns
    -------
    numpy.ndarray
        float32 array of shape ``(n_patches, patch_size**2)`` with
        ``n_patches = ((H - patch_size) // stride + 1) * ((W - patch_size) // stride + 1)``.
        Patches are in row-major order of their top-left corner (left to
        right, then top to bottom) and each is flattened row by row.

    Raises
    ------
    ValueError
        If ``patch_size`` or ``stride`` is not an integer >= 1, if the image is
        not 2-D or 3-D, or if it is smaller than one patch.
    """
    patch_size = _check_positive_int("patch_size", patch_size)
    stride = _check_positive_int("stride", stride)
    gray = to_grayscale(image)
    height, width = gray.shape
    if height < patch_size or width < patch_size:
        raise ValueError(
            f"image must be at least patch_size x patch_size = {patch_size} x {patch_size} "
            f"pixels, got an image of {height} x {width} (height x width); "
            "use a larger image or a smaller patch_size."
        )
    windows = sliding_window_view(gray, (patch_size, patch_size))
    windows = windows[::stride, ::stride]
    patches = windows.reshape(-1, patch_size * patch_size).astype(np.float32, copy=True)
    if remove_mean:
        patches -= patches.mean(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    return patches


def load_image(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an image file into a numpy array with pillow.

    Parameters
    ----------
    path : str or os.PathLike
        Image file in any format pillow understands (JPEG, PNG, ...). It must
        be a regular file: a FIFO, device or socket is refused without being
        read (a FIFO would block, a device never end).

    Returns
    -------
    numpy.ndarray
        ``(H, W)`` for gray images and ``(H, W, 3)`` or ``(H, W, 4)`` otherwise,
        uint8 for 8-bit images (uint16 for 16-bit gray). Palette, CMYK, gray
        with alpha and other modes are converted to RGB or RGBA.

    Raises
    ------
    ValueError
        If the file is missing, not a regular file, or cannot be decoded as an
        image (also one whose header claims more pixels than pillow's
        decompression-bomb limit).
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with _open_regular_file(path) as f, Image.open(f) as img:
            if img.mode not in ("L", "RGB", "RGBA", "I;16"):
                img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
            return np.asarray(img).copy()
    except (
        OSError, UnidentifiedImageError, ValueError, SyntaxError, Image.DecompressionBombError
    ) as err:  # fmt: skip
        raise ValueError(
            f"could not read image file {str(path)!r}: {err}; "
            "check that the file exists and is a valid JPEG or PNG image, or remove it."
        ) from err


def _open_regular_file(path: Path) -> Any:
    """``path`` opened for reading: a regular file only, never blocking on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"it is {guarded.kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def sample_images() -> list[np.ndarray]:
    """Return the left and right halves of a photograph that ships with matplotlib.

    ``grace_hopper.jpg`` (600 x 512 RGB, a public-domain U.S. Navy portrait)
    is part of matplotlib's sample data, installed with the package, so the
    halves make a default data set that needs no network and no other files:
    one half trains, the other is held out.

    Returns
    -------
    list of numpy.ndarray
        Two uint8 arrays of shape ``(600, 256, 3)``.
    """
    from matplotlib import cbook
    from PIL import Image

    with Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)) as img:
        photo = np.asarray(img.convert("RGB"))
    half = photo.shape[1] // 2
    return [photo[:, :half].copy(), photo[:, half : 2 * half].copy()]


def find_images(folder: str | os.PathLike[str]) -> list[Path]:
    """List the JPEG and PNG files under a folder, recursively and sorted.

    Only regular files are listed, and the search never follows a link: an
    entry named like an image that is a link or a special file (a FIFO, a
    device) is refused, so nothing outside the folder is read and nothing
    blocks; other links (to folders, say) are skipped with a warning.

    Parameters
    ----------
    folder : str or os.PathLike
        Folder to search; sub-folders are searched too. It may itself be a link.

    Returns
    -------
    list of pathlib.Path
        Sorted paths of files ending in ``.jpg``, ``.jpeg`` or ``.png``
        (case-insensitive).

    Raises
    ------
    ValueError
        If the folder does not exist, is not a folder, holds no such images,
        or holds an image name that is a link or a special file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(
            f"image folder {str(folder)!r} does not exist or is not a directory; "
            "pass the path of a folder that contains .jpg, .jpeg or .png files."
        )
    found: list[Path] = []
    refused: list[str] = []
    skipped: list[str] = []
    pending = [folder]
    while pending:  # no recursion: a deep tree cannot exhaust the stack
        directory = pending.pop()
        with os.scandir(directory) as entries:
            listed = list(entries)
        for entry in listed:
            mode = entry.stat(follow_symlinks=False).st_mode
            image = Path(entry.name).suffix.lower() in IMAGE_SUFFIXES
            if stat.S_ISDIR(mode):
                pending.append(Path(entry.path))
            elif stat.S_ISREG(mode):
                if image:
                    found.append(Path(entry.path))
            elif image:
                refused.append(f"{os.path.relpath(entry.path, folder)!r} ({guarded.kind_of(mode)})")
            elif stat.S_ISLNK(mode):
                skipped.append(os.path.relpath(entry.path, folder))
    if refused:
        raise ValueError(
            f"image folder {str(folder)!r} holds {len(refused)} image "
            f"{'name that is' if len(refused) == 1 else 'names that are'} not a regular file: "
            f"{', '.join(sorted(refused)[:5])}{', ...' if len(refused) > 5 else ''}. lsdask "
            "reads images only from regular files in the folder, never through a link or from "
            "a special file: replace each link with a copy of its image (cp -L), or remove it."
        )
    if skipped:
        logger.warning(
            "image folder %s: skipped %d links, which are never followed (e.g. %s)",
            folder, len(skipped), sorted(skipped)[:3],
        )  # fmt: skip
    if not found:
        raise ValueError(
            f"image folder {str(folder)!r} contains no .jpg, .jpeg or .png files "
            "(searched recursively); check the path or add images to it."
        )
    return sorted(found)


def _image_name(item: Any, index: int) -> str:
    """Name an input image: the file name for paths, ``image_<index>`` for arrays."""
    if isinstance(item, np.ndarray):
        return f"image_{index}"
    if isinstance(item, str | os.PathLike):
        return Path(item).name
    raise TypeError(
        f"images must hold file paths (str or os.PathLike) or numpy arrays, "
        f"got an item of type {type(item).__name__} at position {index}; "
        "pass a list of paths or of arrays."
    )


def _image_pixels(item: str | os.PathLike[str] | np.ndarray) -> np.ndarray:
    """Turn one input item (a path or an array) into an image array."""
    if isinstance(item, np.ndarray):
        return item
    return load_image(item)


def _n_heldout(n_images: int, heldout_fraction: float) -> int:
    """Number of held-out images: at least 1 if requested and possible, at most n - 1."""
    if heldout_fraction <= 0 or n_images < 2:
        return 0
    count = round(heldout_fraction * n_images)
    return min(max(count, 1), n_images - 1)


class _RowAppender:
    """Append rows to a 2-D Zarr array, writing whole chunks whenever possible.

    Rows are buffered until at least one full chunk of ``chunk_rows`` rows is
    available, so each chunk is written once; memory use is bounded by about
    two chunks plus the rows of one image.
    """

    def __init__(self, array: Any, chunk_rows: int) -> None:
        self.array = array
        self.chunk_rows = chunk_rows
        self._pending: list[np.ndarray] = []
        self._n_pending = 0
        self.n_rows = 0

    @property
    def n_appended(self) -> int:
        """Rows received so far, written or still buffered."""
        return self.n_rows + self._n_pending

    def append(self, rows: np.ndarray) -> None:
        """Queue ``rows`` and write out every complete chunk."""
        if rows.shape[0] == 0:
            return
        self._pending.append(rows)
        self._n_pending += rows.shape[0]
        if self._n_pending >= self.chunk_rows:
            self._flush(final=False)

    def close(self) -> None:
        """Write out whatever is still buffered."""
        self._flush(final=True)

    def _flush(self, *, final: bool) -> None:
        if self._n_pending == 0:
            return
        block = (
            np.concatenate(self._pending, axis=0) if len(self._pending) > 1 else self._pending[0]
        )
        n_write = block.shape[0] if final else (block.shape[0] // self.chunk_rows) * self.chunk_rows
        if n_write > 0:
            start = self.n_rows
            self.array.resize((start + n_write, block.shape[1]))
            self.array[start : start + n_write] = block[:n_write]
            self.n_rows += n_write
        rest = block[n_write:]
        self._pending = [rest] if rest.shape[0] else []
        self._n_pending = rest.shape[0]


def _progress_wrapper(
    progress: bool | None, total: int
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Return a function wrapping an iterable in a tqdm bar, or leaving it as it is."""
    show = sys.stderr.isatty() if progress is None else bool(progress)
    if not show:
        return iter
    from tqdm import tqdm

    def wrap(iterable: Iterable[Any]) -> Iterator[Any]:
        return iter(tqdm(iterable, total=total, desc="patches", unit="image"))

    return wrap


#: what a patch store folder holds: an existing folder with anything else is
#: never replaced (it could be the images themselves)
STORE_ENTRIES = ("train.zarr", "heldout.zarr")


def _check_out_dir(out_dir: Path) -> None:
    """Refuse an output that is not new, empty or a previous patch store (real
    folders ``train.zarr`` and ``heldout.zarr``, nothing else): the store is
    renamed into its place, so a link there would be replaced, not written
    through, and anything else in it would be deleted."""
    if out_dir.is_symlink():
        raise ValueError(
            f"out_dir {str(out_dir)!r} is a symbolic link; a patch store is built beside it "
            "and renamed into its place, which would replace the link, not the folder it "
            f"points to. Pass that folder itself ({os.path.realpath(out_dir)!r}) or a new path."
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(
            f"out_dir {str(out_dir)!r} exists and is not a directory; "
            "choose another output path or remove that file."
        )
    entries = guarded.listdir(out_dir) if out_dir.is_dir() else []
    foreign = [name for name in entries if name not in STORE_ENTRIES]
    foreign += [
        name for name in entries if name in STORE_ENTRIES and not guarded.is_dir(out_dir, name)
    ]
    if foreign:
        raise FileExistsError(
            f"out_dir {str(out_dir)!r} holds {len(foreign)} entries that are not a patch store's "
            f"(e.g. {foreign[:3]}); refusing to replace it. A patch store holds only the "
            f"folders {' and '.join(STORE_ENTRIES)}: choose a new or empty folder, or a "
            "previous store."
        )


def write_patch_store(
    images: Iterable[str | os.PathLike[str] | np.ndarray],
    out_dir: str | os.PathLike[str],
    *,
    patch_size: int = DEFAULT_PATCH_SIZE,
    stride: int = DEFAULT_STRIDE,
    batch_size: int = DEFAULT_BATCH_SIZE,
    heldout_fraction: float = 0.1,
    random_state: int = 0,
    max_images: int | None = None,
    progress: bool | None = None,
) -> dict[str, dict[str, Any]]:
    """Cut images into mean-removed patches and write train/heldout Zarr arrays.

    Images are processed one at a time and their patches are appended to the
    arrays chunk by chunk, so memory stays bounded whatever the number of
    images. The store is built in a temporary sibling directory
    (``.<name>.tmp-<host>-<pid>-<hex>``, see :func:`lsdask.io.atomic.temp_sibling`)
    and renamed to ``out_dir`` only when complete; an
    existing patch store at ``out_dir`` is replaced only then (a folder holding
    anything else is refused before any work). On any error the temporary
    directory is removed, ``out_dir`` is left as it was, and the error is
    re-raised.

    Parameters
    ----------
    images : iterable of path-like or numpy.ndarray
        Image files (read with :func:`load_image`) or image arrays. Paths are
        named by their file name, arrays ``image_0``, ``image_1``, ... by their
        position. The iterable is consumed once up front (only the paths or
        arrays, not the patches, are held).
    out_dir : str or os.PathLike
        Output folder; it will contain ``train.zarr`` and ``heldout.zarr``.
    patch_size : int, default 8
        Side of the square patches; each row has ``patch_size**2`` values.
    stride : int, default 4
        Step between neighbouring patches, in pixels.
    batch_size : int, default 36816
        Rows per Zarr chunk, i.e. patches per minibatch.
    heldout_fraction : float, default 0.1
        Fraction of images (not patches) put in ``heldout.zarr``, in [0, 1).
        When it is > 0 and there are at least two images, at least one image
        is held out and at least one is kept for training.
    random_state : int, default 0
        Seed of the ``numpy.random.default_rng`` permutation choosing the
        held-out images.
    max_images : int or None, default None
        Use only the first ``max_images`` images.
    progress : bool or None, default None
        Show a tqdm progress bar over images; ``None`` shows one only when
        stderr is a terminal.

    Returns
    -------
    dict
        ``{"train": {"path": str, "n_patches": int, "n_images": int},
        "heldout": {...}}`` with the final paths of the two arrays.

    Raises
    ------
    ValueError
        For invalid parameters, no images, or an image that cannot be read
        or is smaller than one patch.
    TypeError
        If an item of ``images`` is neither a path nor a numpy array.

    Notes
    -----
    Each array carries the attributes ``patch_size``, ``stride``,
    ``remove_mean`` (always true), ``n_images`` and ``image_names``.
    """
    import zarr
    from zarr.codecs import ZstdCodec

    patch_size = _check_positive_int("patch_size", patch_size)
    stride = _check_positive_int("stride", stride)
    batch_size = _check_positive_int("batch_size", batch_size)
    if max_images is not None:
        max_images = _check_positive_int("max_images", max_images)
    if not 0.0 <= float(heldout_fraction) < 1.0:
        raise ValueError(
            f"heldout_fraction must be in [0, 1), got {heldout_fraction!r}; "
            "pass e.g. heldout_fraction=0.1 to hold out 10% of the images, or 0 for none."
        )
    if isinstance(images, str | os.PathLike | np.ndarray):
        raise TypeError(
            "images must be an iterable of paths or arrays, got a single "
            f"{type(images).__name__}; wrap it in a list, or use find_images(folder) for a folder."
        )

    items = list(itertools.islice(images, max_images))
    if not items:
        raise ValueError(
            "images is empty, so there is nothing to cut into patches; "
            "pass at least one image path or array (e.g. find_images(folder) or sample_images())."
        )
    n_images = len(items)
    names = [_image_name(item, i) for i, item in enumerate(items)]

    rng = np.random.default_rng(random_state)
    n_held = _n_heldout(n_images, float(heldout_fraction))
    is_heldout = np.zeros(n_images, dtype=bool)
    is_heldout[rng.permutation(n_images)[:n_held]] = True

    out_dir = Path(out_dir)
    _check_out_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = temp_sibling(out_dir)

    dim = patch_size * patch_size
    splits = ("train", "heldout")
    split_names: dict[str, list[str]] = {s: [] for s in splits}
    try:
        tmp_dir.mkdir()
        appenders: dict[str, _RowAppender] = {}
        for split in splits:
            array = zarr.create_array(
                store=_store_class()(tmp_dir / f"{split}.zarr"),
                shape=(0, dim),
                chunks=(batch_size, dim),
                dtype="float32",
                zarr_format=3,
                fill_value=0.0,
                compressors=ZstdCodec(level=ZSTD_LEVEL, checksum=True),
                # every chunk stored, also one of zeros: a missing chunk is then an error
                config={"write_empty_chunks": True},
            )
            appenders[split] = _RowAppender(array, batch_size)

        wrap = _progress_wrapper(progress, n_images)
        for index in wrap(range(n_images)):
            split = "heldout" if is_heldout[index] else "train"
            pixels = _image_pixels(items[index])
            try:
                patches = extract_patches(pixels, patch_size=patch_size, stride=stride)
            except ValueError as err:
                raise ValueError(f"image {names[index]!r}: {err}") from err
            appenders[split].append(patches)
            split_names[split].append(names[index])
            if (index + 1) % _LOG_EVERY == 0:
                logger.info(
                    "patches: %d/%d images done (%d train, %d heldout patches so far)",
                    index + 1,
                    n_images,
                    appenders["train"].n_appended,
                    appenders["heldout"].n_appended,
                )

        for split in splits:
            appender = appenders[split]
            appender.close()
            appender.array.attrs.update(
                {
                    "patch_size": patch_size,
                    "stride": stride,
                    "remove_mean": True,
                    "n_images": len(split_names[split]),
                    "image_names": split_names[split],
                }
            )
            _seal(appender.array, appender.n_rows)
        counts = {split: appenders[split].n_rows for split in splits}
        replace_dir(tmp_dir, out_dir)
    except BaseException:
        remove_tree(tmp_dir)
        raise

    summary = {
        split: {
            "path": str(out_dir / f"{split}.zarr"),
            "n_patches": int(counts[split]),
            "n_images": len(split_names[split]),
        }
        for split in splits
    }
    logger.info(
        "wrote %d train patches (%d images) and %d heldout patches (%d images) to %s",
        summary["train"]["n_patches"],
        summary["train"]["n_images"],
        summary["heldout"]["n_patches"],
        summary["heldout"]["n_images"],
        out_dir,
    )
    return summary


# --------------------------------------------------------------------------- Zarr, checked

#: zstd level of the chunks :func:`write_patch_store` writes; each chunk also
#: carries zstd's checksum of its content, verified when it is decoded
ZSTD_LEVEL = 3

#: the attribute in which :func:`write_patch_store` records what it wrote: the
#: rows, each chunk file's size and SHA-256, and a SHA-256 of the array's
#: metadata; readers check every chunk against it
INTEGRITY_ATTR = "lsdask_integrity"

#: the most bytes one chunk file of an array may decode to (its rows x columns x
#: item size); an array with larger chunks is refused before any is read
MAX_CHUNK_BYTES = 1 << 30

_INTEGRITY_FORMAT = 1
_META_KEYS = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})
#: the fields of ``zarr.json`` that decide what its chunks decode to, digested
#: with the row width (``shape[1:]``): the number of rows may grow by appends
_DIGESTED = ("zarr_format", "node_type", "data_type", "chunk_grid", "chunk_key_encoding",
             "fill_value", "codecs", "storage_transformers", "attributes")  # fmt: skip
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_REWRITE = (
    "To fix, rewrite the store with `lsdask patches` (an array another program wrote: "
    "write it again), or restore it from a copy"
)
_SHA_HEX = frozenset("0123456789abcdef")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _metadata_digest(doc: dict[str, Any]) -> str:
    """SHA-256 of what decides an array's content in its ``zarr.json`` ``doc``:
    the fields of :data:`_DIGESTED` and ``shape[1:]``, with the integrity
    record less its own ``metadata`` digest."""
    fields: dict[str, Any] = {name: doc.get(name) for name in _DIGESTED}
    fields["storage_transformers"] = fields["storage_transformers"] or []
    shape = doc.get("shape")
    fields["row_shape"] = shape[1:] if isinstance(shape, list) else shape
    attrs = fields["attributes"]
    if isinstance(attrs, dict) and isinstance(attrs.get(INTEGRITY_ATTR), dict):
        record = {k: v for k, v in attrs[INTEGRITY_ATTR].items() if k != "metadata"}
        fields["attributes"] = {**attrs, INTEGRITY_ATTR: record}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return _sha256(text.encode("utf-8"))


def _zstd_content_size(data: bytes) -> int | None:
    """The decoded size a zstd frame declares in its header (None: not declared)."""
    if len(data) < 6 or data[:4] != _ZSTD_MAGIC:
        return None
    fhd = data[4]
    single = (fhd >> 5) & 1
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    width = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    if width == 0 or len(data) < pos + width:
        return None
    return int.from_bytes(data[pos : pos + width], "little") + (256 if width == 2 else 0)


class _Checks:
    """What a read of one array's chunk files is checked against."""

    def __init__(self, where: str, array: Any, doc: dict[str, Any] | None) -> None:
        self.where = where
        meta = array.metadata
        if meta.zarr_format == 3:
            self.file_chunks = tuple(meta.chunk_grid.chunk_shape)
            encoding = meta.chunk_key_encoding
            self.separator = encoding.separator
            self.prefix = "c" + encoding.separator if encoding.name == "default" else ""
            codecs = doc.get("codecs") if isinstance(doc, dict) else None
            last = codecs[-1] if isinstance(codecs, list) and codecs else None
            self.zstd = isinstance(last, dict) and last.get("name") == "zstd"
        else:
            self.file_chunks = tuple(meta.chunks)
            self.separator = meta.dimension_separator or "."
            self.prefix = ""
            compressor = getattr(meta, "compressor", None)
            self.zstd = getattr(compressor, "codec_id", None) == "zstd" and not meta.filters
        self.shape = tuple(int(n) for n in array.shape)
        self.chunk_rows = int(self.file_chunks[0]) if self.file_chunks else 1
        self.raw_bytes = math.prod(self.file_chunks) * array.dtype.itemsize
        if self.raw_bytes > MAX_CHUNK_BYTES:
            raise DataError(
                f"{where}: its chunks {self.file_chunks} of {array.dtype} hold "
                f"{self.raw_bytes:,} bytes each, more than the {MAX_CHUNK_BYTES:,} lsdask reads "
                "at once. Rewrite the array with fewer rows per chunk"
            )
        # zstd and the other codecs grow incompressible data by well under 1/8
        self.max_stored = self.raw_bytes + self.raw_bytes // 8 + 65536
        self.digests: dict[str, tuple[int, str]] = {}
        self.unchanged_means_damaged: dict[str, tuple[int, str]] = {}
        self.written_rows: int | None = None
        attrs = doc.get("attributes") if isinstance(doc, dict) else None
        if isinstance(attrs, dict) and INTEGRITY_ATTR in attrs:
            self._arm(doc, attrs[INTEGRITY_ATTR])

    def _arm(self, doc: dict[str, Any], record: Any) -> None:
        where = self.where
        _check_record(record, where)
        if record["metadata"] != _metadata_digest(doc):
            raise DataError(
                f"{where}: its metadata (zarr.json) is not what lsdask wrote: the data type, "
                f"chunk shape, codecs, row width or attributes differ (a damaged file). {_REWRITE}"
            )
        written, n_rows = int(record["rows"]), self.shape[0] if self.shape else 0
        if n_rows < written:
            raise DataError(
                f"{where}: holds {n_rows:,} rows, but lsdask wrote {written:,}: its metadata "
                f"(zarr.json) is damaged, or rows were cut off. {_REWRITE}"
            )
        self.written_rows = written
        self.digests = {key: (int(v[0]), str(v[1])) for key, v in record["chunks"].items()}
        if n_rows > written:
            logger.info(
                "%s: rows %d:%d were appended after lsdask wrote it; they are checked for "
                "presence only", where, written, n_rows,
            )  # fmt: skip
            if written % self.chunk_rows:  # an append rewrote the last, partial chunk
                last = written // self.chunk_rows
                for key in [k for k in self.digests if self.chunk_index(k) == last]:
                    self.unchanged_means_damaged[key] = self.digests.pop(key)

    def chunk_index(self, key: str) -> int | None:
        """The row index of the chunk file ``key`` in the chunk grid (None: not a chunk key)."""
        if not key.startswith(self.prefix):
            return None
        first = key[len(self.prefix) :].split(self.separator)[0]
        return int(first) if first.isdigit() else None

    def rows_of(self, index: int | None) -> str:
        if index is None or not self.shape:
            return ""
        start = index * self.chunk_rows
        return f" (rows {start}:{min(start + self.chunk_rows, self.shape[0])})"

    def chunk_where(self, key: str) -> str:
        return f"{self.where}, chunk {key!r}{self.rows_of(self.chunk_index(key))}"

    def verify(self, key: str, data: bytes) -> None:
        """Refuse chunk bytes that differ from what lsdask wrote, or that declare
        more decoded bytes than the chunk holds."""
        expected = self.digests.get(key)
        if expected is not None:
            got = (len(data), _sha256(data))
            if got != expected:
                raise DataError(
                    f"{self.chunk_where(key)} is not what lsdask wrote ({got[0]:,} bytes, "
                    f"SHA-256 {got[1][:12]}...; written: {expected[0]:,} bytes, "
                    f"{expected[1][:12]}...): the file is damaged. {_REWRITE}"
                )
        elif key in self.unchanged_means_damaged:
            if (len(data), _sha256(data)) == self.unchanged_means_damaged[key]:
                raise DataError(
                    f"{self.chunk_where(key)}: the array claims {self.shape[0]:,} rows, but this "
                    f"chunk is as lsdask wrote it with {self.written_rows:,}: the rows past them "
                    f"were never written and its metadata (zarr.json) is damaged. {_REWRITE}"
                )
        if self.zstd:
            size = _zstd_content_size(data)
            if size is None or size > self.raw_bytes:
                found = "does not declare its decoded size" if size is None else (
                    f"declares {size:,} decoded bytes")  # fmt: skip
                raise DataError(
                    f"{self.chunk_where(key)}: its zstd frame {found}, where the chunk holds "
                    f"{self.raw_bytes:,}: the file is damaged or not written by Zarr. {_REWRITE}"
                )


def _check_record(record: Any, where: str) -> None:
    """Refuse an integrity record that is not as :func:`write_patch_store` writes it."""

    def bad(what: str) -> DataError:
        return DataError(
            f"{where}: lsdask's record of what it wrote ({INTEGRITY_ATTR!r} in zarr.json) is "
            f"damaged: {what}. {_REWRITE}"
        )

    if not isinstance(record, dict):
        raise bad(f"expected a JSON object, found {type(record).__name__}")
    if record.get("format") != _INTEGRITY_FORMAT:
        raise bad(f"expected format {_INTEGRITY_FORMAT}, found {record.get('format')!r}")
    rows, chunks, digest = record.get("rows"), record.get("chunks"), record.get("metadata")
    if type(rows) is not int or rows < 0:
        raise bad(f"expected a row count, found {rows!r}")
    if not (isinstance(digest, str) and len(digest) == 64 and set(digest) <= _SHA_HEX):
        raise bad("the metadata digest is not a SHA-256")
    if not isinstance(chunks, dict):
        raise bad("expected the chunks as a JSON object")
    for key, entry in chunks.items():
        if not (
            isinstance(entry, list) and len(entry) == 2 and type(entry[0]) is int
            and isinstance(entry[1], str) and len(entry[1]) == 64 and set(entry[1]) <= _SHA_HEX
        ):  # fmt: skip
            raise bad(f"the entry of chunk {key!r} is not [size, SHA-256]")


def _slice(data: bytes, byte_range: Any) -> bytes:
    from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

    if isinstance(byte_range, RangeByteRequest):
        return data[byte_range.start : byte_range.end]
    if isinstance(byte_range, OffsetByteRequest):
        return data[byte_range.offset :]
    if isinstance(byte_range, SuffixByteRequest):
        return data[max(0, len(data) - byte_range.suffix) :]
    raise TypeError(f"unexpected byte range {byte_range!r}")


@functools.cache
def _store_class() -> type:
    """:class:`CheckedStore`, a Zarr ``LocalStore`` (built on first use: Zarr is
    imported only where it is needed)."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.storage import LocalStore

    class CheckedStore(LocalStore):
        """A Zarr folder store whose every file operation goes through
        :mod:`lsdask.io.guarded` (no links, no special files, sizes bounded).

        Read (``read_only``), it serves ``zarr.json`` as it read it once, and
        every chunk file checked (:class:`_Checks`, set by
        :func:`open_checked_array`): a missing chunk is an error, never the
        fill value. Written, it records each chunk's size and SHA-256
        (``written``) and writes every file under a temporary name, forced to
        disk and renamed into place.
        """

        def __init__(self, root: str | os.PathLike[str], *, read_only: bool = False) -> None:
            super().__init__(Path(os.path.abspath(root)), read_only=read_only)
            self.checks: _Checks | None = None
            self.meta_cache: dict[str, bytes | None] = {}
            self.written: dict[str, tuple[int, str]] = {}
            self.last_meta: bytes | None = None

        def with_read_only(self, read_only: bool = False) -> Any:
            other = type(self)(self.root, read_only=read_only)
            other.checks, other.meta_cache = self.checks, self.meta_cache
            return other

        # reading ------------------------------------------------------------

        def read_key(self, key: str, byte_range: Any = None) -> bytes | None:
            data = self._read_meta(key) if key in _META_KEYS else self._read_chunk(key)
            return data if data is None or byte_range is None else _slice(data, byte_range)

        def _read_meta(self, key: str) -> bytes | None:
            if self.read_only and key in self.meta_cache:
                return self.meta_cache[key]
            try:
                data: bytes | None = guarded.read_bytes(self.root, key, "json")
            except (FileNotFoundError, NotADirectoryError):
                data = None
            if self.read_only:
                self.meta_cache[key] = data
            return data

        def _read_chunk(self, key: str) -> bytes | None:
            checks = self.checks
            try:
                with guarded.open_read(self.root, key) as f:
                    if checks is None:
                        return f.read()
                    size = os.fstat(f.fileno()).st_size
                    if size > checks.max_stored:
                        raise DataError(
                            f"{checks.chunk_where(key)} holds {size:,} bytes, more than a chunk "
                            f"of {checks.raw_bytes:,} bytes is stored in: the file is damaged "
                            f"or not the array's. {_REWRITE}"
                        )
                    data = f.read(checks.max_stored + 1)
            except (FileNotFoundError, NotADirectoryError):
                if checks is None:
                    return None
                raise DataError(_missing(f"{checks.chunk_where(key)} is missing")) from None
            if len(data) > checks.max_stored:
                raise DataError(f"{checks.chunk_where(key)} grew while it was read. {_REWRITE}")
            checks.verify(key, data)
            return data

        async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
            prototype = prototype or default_buffer_prototype()
            data = await asyncio.to_thread(self.read_key, key, byte_range)
            return None if data is None else prototype.buffer.from_bytes(data)

        def get_sync(self, key: str, *, prototype: Any = None, byte_range: Any = None) -> Any:
            prototype = prototype or default_buffer_prototype()
            data = self.read_key(key, byte_range)
            return None if data is None else prototype.buffer.from_bytes(data)

        async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list[Any]:
            return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

        async def exists(self, key: str) -> bool:
            return await asyncio.to_thread(guarded.is_file, self.root, key)

        async def getsize(self, key: str) -> int:
            with guarded.open_read(self.root, key) as f:
                return os.fstat(f.fileno()).st_size

        async def list(self) -> Any:  # type: ignore[override]
            for key in guarded.check_tree(self.root):
                yield key

        async def list_prefix(self, prefix: str) -> Any:  # type: ignore[override]
            for key in guarded.check_tree(self.root):
                if key.startswith(prefix):
                    yield key

        async def list_dir(self, prefix: str) -> Any:  # type: ignore[override]
            for name in guarded.listdir(self.root, prefix.strip("/") or "."):
                yield name

        # writing ------------------------------------------------------------

        def write_key(self, key: str, data: bytes) -> None:
            names = guarded.relative(self.root, key)
            tmp = "/".join((*names[:-1], f".{names[-1]}.tmp-{uuid.uuid4().hex[:8]}"))
            try:
                with guarded.open_write(self.root, tmp) as f:
                    f.write(data)
                    fsops.fsync(f)
                guarded.replace(self.root, tmp, key)
            except BaseException:
                guarded.unlink(self.root, tmp)
                raise
            if key in _META_KEYS:
                self.last_meta = data
            else:
                self.written[key] = (len(data), _sha256(data))

        async def set(self, key: str, value: Any) -> None:
            self._check_writable()
            await asyncio.to_thread(self.write_key, key, value.to_bytes())

        def set_sync(self, key: str, value: Any) -> None:
            self._check_writable()
            self.write_key(key, value.to_bytes())

        async def set_if_not_exists(self, key: str, value: Any) -> None:
            if not await self.exists(key):
                await self.set(key, value)

        def _delete(self, key: str) -> None:
            self._check_writable()
            names = guarded.relative(self.root, key)
            for name in [key] if names else guarded.listdir(self.root):
                guarded.remove_tree(self.root, name)
            for written in [k for k in self.written if k == key or k.startswith(key + "/")]:
                del self.written[written]

        async def delete(self, key: str) -> None:
            await asyncio.to_thread(self._delete, key)

        def delete_sync(self, key: str) -> None:
            self._delete(key)

        async def delete_dir(self, prefix: str) -> None:
            await asyncio.to_thread(self._delete, prefix.strip("/"))

        async def clear(self) -> None:
            await asyncio.to_thread(self._delete, "")

    return CheckedStore


def _seal(array: Any, n_rows: int) -> None:
    """Record in ``array``'s attributes what was written to it (:data:`INTEGRITY_ATTR`):
    its rows, each chunk file's size and SHA-256, and the digest of its metadata;
    then read it back through :func:`open_checked_array` as a reader will."""
    store = array.store
    record: dict[str, Any] = {
        "format": _INTEGRITY_FORMAT,
        "rows": int(n_rows),
        "chunks": {key: list(entry) for key, entry in sorted(store.written.items())},
    }
    array.attrs.update({INTEGRITY_ATTR: record})
    record["metadata"] = _metadata_digest(json.loads(store.last_meta))
    array.attrs.update({INTEGRITY_ATTR: record})
    open_checked_array(store.root, whole=True)


def open_checked_array(
    path: str | os.PathLike[str], *, where: str | None = None, whole: bool = False
) -> Any:
    """The Zarr array in the folder ``path``, read only through
    :mod:`lsdask.io.guarded` and checked.

    ``zarr.json`` is bounded in size; every chunk read must be present (a
    missing one is a :class:`~lsdask.errors.DataError` naming the store, the
    chunk and its rows, never fill values); a store written by
    :func:`write_patch_store` has its metadata and every chunk checked against
    the SHA-256 recorded when it was written; zstd chunks must declare a decoded
    size no larger than the chunk, and zstd's own checksum, where written, is
    verified as a chunk is decoded. No file is read through a link, and a FIFO
    or device in a file's place is refused without blocking.

    With ``whole`` (what a fit does once, before its first batch), the whole
    folder is checked first: a link or special file anywhere in it is refused
    before Zarr opens it, and so is a missing chunk file. Without it, only the
    files read are checked (what each batch's task does).
    """
    import zarr

    root = Path(os.path.abspath(path))
    where = where or f"Zarr array {str(root)!r}"
    files: list[str] = []
    if whole:
        if root.exists() and not root.is_dir():
            raise DataError(f"{where} is not a readable Zarr array: it is not a folder")
        files = guarded.check_tree(root)
    store = _store_class()(root, read_only=True)
    try:
        array = zarr.open_array(store=store, mode="r")
    except DataError:
        raise
    except Exception as exc:
        if not root.exists():
            raise FileNotFoundError(f"{where}: the folder does not exist") from exc
        raise DataError(f"{where} is not a readable Zarr array: {one_line(exc, 300)}") from exc
    doc: dict[str, Any] | None = None
    raw = store.meta_cache.get("zarr.json")
    if raw is not None:
        try:
            parsed = json.loads(raw)
        except ValueError as exc:  # zarr parsed it: unreachable unless zarr's reading changes
            raise DataError(f"{where}: zarr.json is not valid JSON: {exc}. {_REWRITE}") from exc
        doc = parsed if isinstance(parsed, dict) else None
    store.checks = _Checks(where, array, doc)
    if whole:
        _check_all_chunks(array, set(files))
    return array


def _missing(where: str) -> str:
    return (
        f"{where}: its file was deleted or never written, and lsdask does not read a missing "
        "chunk as fill values. (Zarr leaves out a chunk that holds only the fill value unless "
        "the array is written with config={'write_empty_chunks': True}.) " + _REWRITE
    )


def _check_all_chunks(array: Any, files: set[str]) -> None:
    """Refuse an array whose folder (its regular ``files``) lacks a chunk file."""
    checks: _Checks = array.store.checks
    counts = [-(-n // c) if c else 0 for n, c in zip(checks.shape, checks.file_chunks, strict=True)]
    missing: list[str] = []
    # stops at the third missing chunk: a crafted shape cannot make this loop long
    for coords in itertools.product(*(range(c) for c in counts)):
        key = array.metadata.encode_chunk_key(coords)
        if key not in files:
            missing.append(key)
            if len(missing) == 3:
                break
    if missing:
        others = f" (so are {missing[1:]})" if len(missing) > 1 else ""
        raise DataError(_missing(f"{checks.chunk_where(missing[0])} is missing{others}"))


def read_rows(array: Any, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of an array from :func:`open_checked_array`, read
    chunk by chunk: an error names the chunk, its rows and the store."""
    checks: _Checks = array.store.checks
    size = checks.chunk_rows
    parts = []
    a = start
    while a < stop:
        b = min((a // size + 1) * size, stop)
        try:
            parts.append(np.asarray(array[a:b]))
        except DataError:
            raise
        except Exception as exc:
            index = a // size
            if math.prod(checks.file_chunks[1:]) >= math.prod(checks.shape[1:]):
                where = checks.chunk_where(
                    array.metadata.encode_chunk_key((index,) + (0,) * (len(checks.shape) - 1))
                )
            else:
                where = f"{checks.where}, the chunks{checks.rows_of(index)}"
            raise DataError(
                f"{where}: could not be decoded: {one_line(exc, 300)}. The chunk file is damaged. "
                + _REWRITE
            ) from exc
        a = b
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.asarray(array[start:stop])
