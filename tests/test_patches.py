"""Tests for lsdask.io.patches: grayscale, patch extraction and the Zarr patch store."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from PIL import Image

from lsdask.io.patches import (
    extract_patches,
    find_images,
    load_image,
    sample_images,
    to_grayscale,
    write_patch_store,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
BSDS_DIR = REPO_ROOT.parent / "shared" / "data" / "bsds500"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def reference_patches(gray: np.ndarray, patch_size: int, stride: int, remove_mean: bool):
    """Plain double loop over top-left corners, row-major."""
    height, width = gray.shape
    rows = []
    for top in range(0, height - patch_size + 1, stride):
        for left in range(0, width - patch_size + 1, stride):
            patch = gray[top : top + patch_size, left : left + patch_size].astype(np.float64)
            vec = patch.reshape(-1)
            if remove_mean:
                vec = vec - vec.mean()
            rows.append(vec)
    return np.array(rows)


def random_rgb(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    return rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)


# --------------------------------------------------------------------------- grayscale


def test_to_grayscale_uses_601_weights(rng):
    img = random_rgb(rng, 5, 7)
    expected = (0.299 * img[..., 0] + 0.587 * img[..., 1] + 0.114 * img[..., 2]) / 255.0
    gray = to_grayscale(img)
    assert gray.dtype == np.float32
    assert gray.shape == (5, 7)
    np.testing.assert_allclose(gray, expected, atol=1e-6)


@pytest.mark.parametrize(
    ("rgb", "value"),
    [((255, 0, 0), 0.299), ((0, 255, 0), 0.587), ((0, 0, 255), 0.114), ((255, 255, 255), 1.0)],
)
def test_to_grayscale_pure_colors(rgb, value):
    img = np.zeros((2, 2, 3), dtype=np.uint8)
    img[...] = rgb
    np.testing.assert_allclose(to_grayscale(img), value, atol=1e-6)


def test_to_grayscale_rgba_gray_and_float(rng):
    rgb = random_rgb(rng, 4, 6)
    rgba = np.concatenate([rgb, rng.integers(0, 256, (4, 6, 1), dtype=np.uint8)], axis=2)
    np.testing.assert_allclose(to_grayscale(rgba), to_grayscale(rgb))

    gray_u8 = rng.integers(0, 256, (4, 6), dtype=np.uint8)
    np.testing.assert_allclose(to_grayscale(gray_u8), gray_u8 / 255.0, atol=1e-7)
    np.testing.assert_allclose(to_grayscale(gray_u8[:, :, None]), gray_u8 / 255.0, atol=1e-7)

    floats = rng.random((4, 6)) * 3.0 - 1.0  # out of [0, 1] on purpose: passed through
    out = to_grayscale(floats)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, floats, rtol=1e-6)


def test_to_grayscale_bad_inputs():
    with pytest.raises(ValueError, match=r"image must be a 2-D .* ndim=1"):
        to_grayscale(np.zeros(10))
    with pytest.raises(ValueError, match=r"ndim=4"):
        to_grayscale(np.zeros((2, 3, 4, 5)))
    with pytest.raises(ValueError, match=r"1 \(gray\), 3 \(RGB\) or 4 \(RGBA\).*2 channels"):
        to_grayscale(np.zeros((4, 4, 2)))


# --------------------------------------------------------------------------- patches


@pytest.mark.parametrize(
    ("height", "width", "patch_size", "stride"),
    [
        (8, 8, 8, 4),
        (9, 13, 8, 4),
        (20, 17, 8, 4),
        (21, 30, 8, 3),
        (16, 16, 4, 4),
        (11, 7, 3, 1),
        (10, 12, 5, 7),
        (6, 6, 1, 2),
    ],
)
def test_extract_patches_matches_double_loop(rng, height, width, patch_size, stride):
    img = random_rgb(rng, height, width)
    got = extract_patches(img, patch_size=patch_size, stride=stride)
    ref = reference_patches(to_grayscale(img), patch_size, stride, remove_mean=True)
    n_expected = ((height - patch_size) // stride + 1) * ((width - patch_size) // stride + 1)
    assert got.shape == (n_expected, patch_size**2) == ref.shape
    assert got.dtype == np.float32
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, ref, atol=1e-6)

    raw = extract_patches(img, patch_size=patch_size, stride=stride, remove_mean=False)
    ref_raw = reference_patches(to_grayscale(img), patch_size, stride, remove_mean=False)
    np.testing.assert_allclose(raw, ref_raw, atol=1e-6)


def test_extract_patches_gray_float_input(rng):
    gray = rng.random((15, 19)).astype(np.float32)
    got = extract_patches(gray)
    np.testing.assert_allclose(got, reference_patches(gray, 8, 4, True), atol=1e-6)


def test_extract_patches_have_zero_mean(rng):
    img = random_rgb(rng, 40, 33)
    patches = extract_patches(img)
    assert patches.shape == (9 * 7, 64)
    np.testing.assert_allclose(patches.mean(axis=1), 0.0, atol=1e-6)
    assert np.abs(patches).max() > 0.1  # not trivially zero


def test_extract_patches_row_major_order():
    gray = np.arange(12 * 16, dtype=np.float32).reshape(12, 16)
    raw = extract_patches(gray, patch_size=4, stride=4, remove_mean=False)
    corners = raw[:, 0]  # value of the top-left pixel = 16 * top + left
    expected = [16 * top + left for top in (0, 4, 8) for left in (0, 4, 8, 12)]
    np.testing.assert_array_equal(corners, expected)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"patch_size": 0}, r"patch_size must be an integer >= 1, got 0"),
        ({"patch_size": -3}, r"patch_size must be an integer >= 1, got -3"),
        ({"patch_size": 2.5}, r"patch_size must be an integer >= 1, got 2\.5"),
        ({"stride": 0}, r"stride must be an integer >= 1, got 0; pass stride=1"),
        ({"stride": -1}, r"stride must be an integer >= 1, got -1"),
    ],
)
def test_extract_patches_bad_parameters(rng, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        extract_patches(random_rgb(rng, 16, 16), **kwargs)


def test_extract_patches_image_too_small(rng):
    with pytest.raises(ValueError, match=r"at least patch_size x patch_size = 8 x 8 .* 7 x 20"):
        extract_patches(random_rgb(rng, 7, 20))
    with pytest.raises(ValueError, match=r"smaller patch_size"):
        extract_patches(random_rgb(rng, 20, 5))


def test_extract_patches_bad_ndim():
    with pytest.raises(ValueError, match=r"2-D \(H, W\) gray or 3-D \(H, W, C\).*ndim=1"):
        extract_patches(np.zeros(100))
    with pytest.raises(ValueError, match=r"ndim=4.*not a batch"):
        extract_patches(np.zeros((2, 16, 16, 3)))


# --------------------------------------------------------------------------- files


def save_images(folder: Path, rng: np.random.Generator, sizes: list[tuple[int, int]]):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (height, width) in enumerate(sizes):
        path = folder / f"img_{i:02d}.png"
        Image.fromarray(random_rgb(rng, height, width)).save(path)
        paths.append(path)
    return paths


def test_load_image_and_find_images(tmp_path, rng):
    paths = save_images(tmp_path / "a", rng, [(10, 12), (9, 9)])
    sub = tmp_path / "a" / "sub"
    sub.mkdir()
    Image.fromarray(random_rgb(rng, 8, 8)).save(sub / "z.JPG", format="JPEG")
    (tmp_path / "a" / "notes.txt").write_text("not an image")

    found = find_images(tmp_path / "a")
    assert found == sorted([*paths, sub / "z.JPG"])

    img = load_image(paths[0])
    assert img.dtype == np.uint8
    assert img.shape == (10, 12, 3)
    gray_path = tmp_path / "gray.png"
    Image.fromarray(np.full((5, 6), 7, dtype=np.uint8)).save(gray_path)
    assert load_image(gray_path).shape == (5, 6)


def test_load_image_errors_name_the_file(tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"this is not a jpeg")
    with pytest.raises(ValueError, match=r"could not read image file .*broken\.jpg"):
        load_image(bad)
    with pytest.raises(ValueError, match=r"could not read image file .*missing\.png"):
        load_image(tmp_path / "missing.png")


def test_find_images_errors(tmp_path):
    with pytest.raises(ValueError, match=r"image folder .*nowhere.* does not exist"):
        find_images(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.txt").write_text("x")
    with pytest.raises(ValueError, match=r"image folder .*empty.* contains no \.jpg"):
        find_images(tmp_path / "empty")


def test_sample_images():
    images = sample_images()
    assert len(images) == 2
    for img in images:
        assert img.dtype == np.uint8 and img.shape == (600, 256, 3)
    assert not np.array_equal(images[0], images[1])


# --------------------------------------------------------------------------- store


def open_split(out_dir: Path, split: str) -> zarr.Array:
    return zarr.open_array(str(out_dir / f"{split}.zarr"), mode="r")


def test_write_patch_store_round_trip_arrays(tmp_path, rng):
    sizes = [(16, 20), (12, 12), (25, 9), (8, 8), (30, 17), (13, 21), (9, 40)]
    images = [random_rgb(rng, h, w) for h, w in sizes]
    per_image = [extract_patches(img) for img in images]
    batch_size = 7
    out = tmp_path / "store"

    summary = write_patch_store(
        images, out, batch_size=batch_size, heldout_fraction=0.3, random_state=3, progress=False
    )

    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # no temporary leftovers
    assert sorted(p.name for p in out.iterdir()) == ["heldout.zarr", "train.zarr"]
    names = {}
    total = 0
    for split in ("train", "heldout"):
        arr = open_split(out, split)
        assert arr.metadata.zarr_format == 3
        assert arr.dtype == np.float32
        assert arr.chunks == (batch_size, 64)
        assert arr.shape[1] == 64
        attrs = dict(arr.attrs)
        assert attrs["patch_size"] == 8
        assert attrs["stride"] == 4
        assert attrs["remove_mean"] is True
        assert attrs["n_images"] == len(attrs["image_names"])
        names[split] = attrs["image_names"]
        assert summary[split]["n_patches"] == arr.shape[0]
        assert summary[split]["n_images"] == attrs["n_images"]
        assert summary[split]["path"] == str(out / f"{split}.zarr")
        total += arr.shape[0]

        # Contents: the patches of the split's images, concatenated in input order.
        idx = [int(name.split("_")[1]) for name in attrs["image_names"]]
        assert idx == sorted(idx)
        expected = np.concatenate([per_image[i] for i in idx], axis=0)
        np.testing.assert_allclose(arr[:], expected, atol=1e-6)

    assert set(names["train"]).isdisjoint(names["heldout"])
    assert set(names["train"]) | set(names["heldout"]) == {f"image_{i}" for i in range(7)}
    assert len(names["heldout"]) == 2  # round(0.3 * 7)
    assert total == sum(p.shape[0] for p in per_image)


def test_write_patch_store_from_files(tmp_path, rng):
    paths = save_images(tmp_path / "imgs", rng, [(20, 24), (18, 18), (12, 30), (16, 16)])
    out = tmp_path / "out" / "nested"
    summary = write_patch_store(
        find_images(tmp_path / "imgs"),
        out,
        patch_size=4,
        stride=2,
        batch_size=50,
        heldout_fraction=0.01,  # tiny, but still one heldout image
        progress=False,
    )
    train, heldout = open_split(out, "train"), open_split(out, "heldout")
    assert train.chunks == heldout.chunks == (50, 16)
    assert summary["heldout"]["n_images"] == 1
    assert summary["train"]["n_images"] == 3
    names = list(train.attrs["image_names"]) + list(heldout.attrs["image_names"])
    assert sorted(names) == [p.name for p in paths]
    expected_total = sum(extract_patches(load_image(p), 4, 2).shape[0] for p in paths)
    assert train.shape[0] + heldout.shape[0] == expected_total


def test_write_patch_store_split_is_seeded(tmp_path, rng):
    images = [random_rgb(rng, 10, 10) for _ in range(10)]

    def heldout_names(seed: int, name: str) -> list[str]:
        write_patch_store(images, tmp_path / name, random_state=seed, progress=False)
        return list(open_split(tmp_path / name, "heldout").attrs["image_names"])

    first = heldout_names(0, "a")
    assert first == heldout_names(0, "b")
    assert len(first) == 1
    seeds = {tuple(heldout_names(s, f"s{s}")) for s in range(1, 6)}
    assert len(seeds | {tuple(first)}) > 1


def test_write_patch_store_no_heldout_and_max_images(tmp_path, rng):
    images = [random_rgb(rng, 12, 12) for _ in range(5)]
    summary = write_patch_store(
        iter(images), tmp_path / "s", heldout_fraction=0.0, max_images=3, progress=False
    )
    train_path = str(tmp_path / "s" / "train.zarr")
    assert summary["train"] == {"path": train_path, "n_patches": 12, "n_images": 3}
    assert summary["heldout"]["n_patches"] == 0
    heldout = open_split(tmp_path / "s", "heldout")
    assert heldout.shape == (0, 64)
    assert list(heldout.attrs["image_names"]) == []

    # A single image cannot be split: it all goes to train.
    one = write_patch_store(images[:1], tmp_path / "one", progress=False)
    assert one["train"]["n_images"] == 1 and one["heldout"]["n_images"] == 0


def test_write_patch_store_replaces_existing(tmp_path, rng):
    out = tmp_path / "store"
    write_patch_store([random_rgb(rng, 16, 16)] * 5, out, heldout_fraction=0.0, progress=False)
    write_patch_store([random_rgb(rng, 16, 16)] * 3, out, heldout_fraction=0.0, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["heldout.zarr", "train.zarr"]
    assert open_split(out, "train").attrs["n_images"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_write_patch_store_failure_leaves_nothing(tmp_path, rng):
    paths = save_images(tmp_path / "imgs", rng, [(16, 16), (16, 16), (16, 16)])
    corrupt = tmp_path / "imgs" / "img_01.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n garbage, truncated")
    out = tmp_path / "store"
    with pytest.raises(ValueError, match=r"could not read image file .*img_01\.png"):
        write_patch_store(paths, out, batch_size=8, progress=False)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["imgs"]


def test_write_patch_store_failure_keeps_existing(tmp_path, rng):
    out = tmp_path / "store"
    write_patch_store([random_rgb(rng, 16, 16)] * 5, out, heldout_fraction=0.0, progress=False)
    images = [random_rgb(rng, 16, 16), random_rgb(rng, 5, 5)]  # second one is too small
    with pytest.raises(ValueError, match=r"image 'image_1': image must be at least"):
        write_patch_store(images, out, progress=False)
    assert open_split(out, "train").attrs["n_images"] == 5  # the previous store, intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"patch_size": 0}, r"patch_size must be an integer >= 1, got 0"),
        ({"stride": 0}, r"stride must be an integer >= 1"),
        ({"batch_size": 0}, r"batch_size must be an integer >= 1"),
        ({"max_images": 0}, r"max_images must be an integer >= 1"),
        ({"heldout_fraction": 1.0}, r"heldout_fraction must be in \[0, 1\), got 1\.0"),
        ({"heldout_fraction": -0.1}, r"heldout_fraction must be in \[0, 1\)"),
    ],
)
def test_write_patch_store_bad_parameters(tmp_path, rng, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        write_patch_store([random_rgb(rng, 16, 16)], tmp_path / "s", progress=False, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_write_patch_store_empty_and_bad_items(tmp_path):
    with pytest.raises(ValueError, match=r"images is empty"):
        write_patch_store([], tmp_path / "s", progress=False)
    with pytest.raises(TypeError, match=r"file paths .* or numpy arrays, got an item of type int"):
        write_patch_store([3], tmp_path / "s", progress=False)
    with pytest.raises(TypeError, match=r"wrap it in a list"):
        write_patch_store(tmp_path, tmp_path / "s", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_write_patch_store_logs_every_50_images(tmp_path, rng, caplog):
    images = [random_rgb(rng, 8, 8)] * 101
    with caplog.at_level(logging.INFO, logger="lsdask.io.patches"):
        summary = write_patch_store(images, tmp_path / "s", progress=False)
    progress_lines = [r.message for r in caplog.records if "images done" in r.message]
    assert len(progress_lines) == 2
    assert progress_lines[0].startswith("patches: 50/101 images done")
    assert summary["train"]["n_patches"] + summary["heldout"]["n_patches"] == 101


def test_write_patch_store_progress_bar(tmp_path, rng, capsys):
    write_patch_store([random_rgb(rng, 8, 8)] * 3, tmp_path / "s", progress=True)
    assert "3/3" in capsys.readouterr().err


def test_make_patches_script(tmp_path, rng):
    save_images(tmp_path / "d1", rng, [(16, 16), (12, 20)])
    save_images(tmp_path / "d2", rng, [(10, 10)])
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "datasets" / "make_patches.py"),
            str(tmp_path / "d1"),
            str(tmp_path / "d2"),
            "--out",
            str(out),
            "--batch-size",
            "10",
            "--heldout-fraction",
            "0.34",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert '"n_patches"' in result.stdout
    assert open_split(out, "train").chunks == (10, 64)
    n_total = open_split(out, "train").shape[0] + open_split(out, "heldout").shape[0]
    assert n_total == 9 + 2 * 4 + 1


# --------------------------------------------------------------------------- real data


@pytest.mark.skipif(
    not (BSDS_DIR / "train").is_dir(),
    reason=f"BSDS500 images not found at {BSDS_DIR / 'train'} (shared data folder absent)",
)
def test_bsds500_two_images(tmp_path):
    paths = find_images(BSDS_DIR / "train")[:2]
    assert len(paths) == 2
    counts = []
    for path in paths:
        img = load_image(path)
        assert img.dtype == np.uint8 and img.ndim == 3
        assert sorted(img.shape[:2]) == [321, 481]
        patches = extract_patches(img)
        assert patches.shape == (119 * 79, 64)
        np.testing.assert_allclose(patches.mean(axis=1), 0.0, atol=1e-5)
        counts.append(patches.shape[0])

    summary = write_patch_store(paths, tmp_path / "bsds", batch_size=4096, progress=False)
    assert summary["train"]["n_images"] == 1 and summary["heldout"]["n_images"] == 1
    assert summary["train"]["n_patches"] + summary["heldout"]["n_patches"] == sum(counts)
    train = open_split(tmp_path / "bsds", "train")
    assert train.chunks == (4096, 64)
    assert np.isfinite(train[:4096]).all()


def test_a_folder_that_is_not_a_patch_store_is_never_replaced(tmp_path, rng):
    """--out pointing at the images (or any other folder) must not delete them."""
    from PIL import Image

    images = tmp_path / "imgs"
    images.mkdir()
    for i in range(3):
        Image.fromarray(random_rgb(rng, 20, 24)).save(images / f"{i}.png")
    before = sorted(p.name for p in images.iterdir())
    with pytest.raises(FileExistsError, match=r"holds 3 entries that are not a patch store's"):
        write_patch_store(find_images(images), images, progress=False)
    assert sorted(p.name for p in images.iterdir()) == before
    # a previous store is replaced, as is an empty folder
    (tmp_path / "store").mkdir()
    for _ in range(2):
        write_patch_store(find_images(images), tmp_path / "store", progress=False)
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["heldout.zarr", "train.zarr"]
