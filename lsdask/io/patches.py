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

import itertools
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from lsdask.io.atomic import remove_tree, replace_dir, temp_sibling

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_PATCH_SIZE",
    "DEFAULT_STRIDE",
    "IMAGE_SUFFIXES",
    "LUMA_WEIGHTS",
    "extract_patches",
    "find_images",
    "load_image",
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
        Image file in any format pillow understands (JPEG, PNG, ...).

    Returns
    -------
    numpy.ndarray
        ``(H, W)`` for gray images and ``(H, W, 3)`` or ``(H, W, 4)`` otherwise,
        uint8 for 8-bit images (uint16 for 16-bit gray). Palette, CMYK, gray
        with alpha and other modes are converted to RGB or RGBA.

    Raises
    ------
    ValueError
        If the file is missing or cannot be decoded as an image.
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as img:
            if img.mode not in ("L", "RGB", "RGBA", "I;16"):
                img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
            return np.asarray(img).copy()
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as err:
        raise ValueError(
            f"could not read image file {str(path)!r}: {err}; "
            "check that the file exists and is a valid JPEG or PNG image, or remove it."
        ) from err


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

    Parameters
    ----------
    folder : str or os.PathLike
        Folder to search; sub-folders are searched too.

    Returns
    -------
    list of pathlib.Path
        Sorted paths of files ending in ``.jpg``, ``.jpeg`` or ``.png``
        (case-insensitive).

    Raises
    ------
    ValueError
        If the folder does not exist, is not a folder, or holds no such images.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(
            f"image folder {str(folder)!r} does not exist or is not a directory; "
            "pass the path of a folder that contains .jpg, .jpeg or .png files."
        )
    found = sorted(
        p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()
    )
    if not found:
        raise ValueError(
            f"image folder {str(folder)!r} contains no .jpg, .jpeg or .png files "
            "(searched recursively); check the path or add images to it."
        )
    return found


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
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(
            f"out_dir {str(out_dir)!r} exists and is not a directory; "
            "choose another output path or remove that file."
        )
    foreign = sorted(
        p.name
        for p in (out_dir.iterdir() if out_dir.is_dir() else ())
        if p.name not in STORE_ENTRIES
    )
    if foreign:
        raise FileExistsError(
            f"out_dir {str(out_dir)!r} holds {len(foreign)} entries that are not a patch store's "
            f"(e.g. {foreign[:3]}); refusing to replace it. A patch store holds only "
            f"{' and '.join(STORE_ENTRIES)}: choose a new or empty folder, or a previous store."
        )
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
                store=str(tmp_dir / f"{split}.zarr"),
                shape=(0, dim),
                chunks=(batch_size, dim),
                dtype="float32",
                zarr_format=3,
                fill_value=0.0,
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
