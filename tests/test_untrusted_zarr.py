"""Zarr patch stores and image folders that other jobs and people write (issue 39).

A deleted chunk must be an error, never fill-value zeros; a flipped bit in a
chunk or in ``zarr.json`` must be refused, never loaded; a link or special file
anywhere in a store is refused before Zarr opens it, and a FIFO never blocks;
``lsdask patches`` reads images only from regular files below its image
folders and writes nothing outside its output folder.

The bit-flip suite flips ``LSDASK_BITFLIPS`` random single bits (CI: 100; the
full run: 500) over a store's chunk files and metadata and loads the whole
array through the reader a fit uses after each; run with ``pytest -s`` to see
its counts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr
from PIL import Image

import lsdask
from lsdask.cli import main
from lsdask.errors import DataError
from lsdask.io.patches import load_image, write_patch_store
from lsdask.io.sources import zarr_source
from tests.lsdask_processes import lsdask_env

FLIPS = int(os.environ.get("LSDASK_BITFLIPS", "100"))
#: a command that hangs (on a FIFO) fails the test instead of hanging it
TIMEOUT = 120


def _images(rng: np.random.Generator, n: int = 4) -> list[np.ndarray]:
    return [rng.integers(0, 256, size=(40, 48, 3), dtype=np.uint8) for _ in range(n)]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A small patch store: 3 training images (297 rows in chunks of 30), 1 heldout."""
    out = tmp_path / "store"
    write_patch_store(
        _images(np.random.default_rng(0)), out, batch_size=30, heldout_fraction=0.25,
        progress=False,
    )  # fmt: skip
    return out


def _load_all(path: Path) -> np.ndarray:
    """Every row of the array, read as a fit reads it (the folder checked, then each batch)."""
    source = zarr_source(path)
    return np.concatenate([batch.load() for batch in source.batches])


def _fit(path: Path) -> lsdask.GaussianMixture:
    return lsdask.GaussianMixture(2, n_laps=1, client="sync", random_state=0).fit(str(path))


def _lsdask(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``lsdask ARGS`` in a child process that may not hang (FIFOs)."""
    return subprocess.run(
        [sys.executable, "-m", "lsdask", *map(str, args)],
        capture_output=True, text=True, env=lsdask_env(), timeout=TIMEOUT, cwd=cwd,
    )  # fmt: skip


@contextlib.contextmanager
def _no_hang(seconds: int = TIMEOUT) -> Iterator[None]:
    """Fail (TimeoutError) rather than hang in this process (a blocking open is interrupted)."""

    def stop(signum: int, frame: object) -> None:
        raise TimeoutError(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _one_line_error(run: subprocess.CompletedProcess) -> str:
    """The command's error, after checking it is one line and no traceback."""
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.startswith("lsdask: error:")]
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def _tree_digest(folder: Path) -> dict[str, str]:
    """Every entry below ``folder`` (links as their target's name, never followed)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                found[rel] = "link -> " + os.readlink(path)
            elif path.is_file():
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[rel] = "folder" if path.is_dir() else "special"
    return found


def _flip(path: Path, byte: int, bit: int) -> bytes:
    """Flip one bit of ``path``; return its bytes before."""
    data = path.read_bytes()
    flipped = bytearray(data)
    flipped[byte] ^= 1 << bit
    path.write_bytes(bytes(flipped))
    return data


def _data_offset(chunk: Path) -> int:
    """An offset inside the compressed data of a zstd chunk (past its frame header)."""
    return len(chunk.read_bytes()) // 2


# --------------------------------------------------------------------------- missing chunks


def test_a_deleted_chunk_is_an_error_naming_the_store_chunk_and_rows(store: Path) -> None:
    train = store / "train.zarr"
    source = zarr_source(train)  # opened before the chunk goes: the batch's own read refuses
    (train / "c" / "1" / "0").unlink()
    with pytest.raises(DataError, match=r"train\.zarr.*chunk 'c/1/0' \(rows 30:60\) is missing"
                       r".*lsdask patches"):  # fmt: skip
        source.batches[1].load()
    with pytest.raises(DataError, match=r"train\.zarr.*chunk 'c/1/0' \(rows 30:60\) is missing"):
        _fit(train)
    run = _lsdask("fit-gmm", train, "--components", "2", "--laps", "1", "--sync")
    assert "chunk 'c/1/0' (rows 30:60) is missing" in _one_line_error(run)


def test_a_missing_chunk_of_an_array_lsdask_did_not_write_is_an_error(tmp_path: Path) -> None:
    """Stores of other writers, and those lsdask wrote before it recorded its
    chunks, are checked for missing chunks too."""
    path = tmp_path / "x.zarr"
    z = zarr.create_array(str(path), shape=(100, 3), chunks=(25, 3), dtype="f8")
    z[:] = np.random.default_rng(0).normal(size=(100, 3))
    np.testing.assert_array_equal(_load_all(path), z[:])
    (path / "c" / "3" / "0").unlink()
    with pytest.raises(DataError, match=r"chunk 'c/3/0' \(rows 75:100\) is missing.*"
                       r"write_empty_chunks"):  # fmt: skip
        _load_all(path)


def test_a_chunk_of_zeros_is_stored(tmp_path: Path) -> None:
    """Flat images give patches of zeros: their chunk is written, so that a
    missing chunk can be told from one of zeros."""
    flat = [np.full((40, 48), 128, dtype=np.uint8)] * 2
    write_patch_store(flat, tmp_path / "flat", batch_size=30, heldout_fraction=0, progress=False)
    rows = _load_all(tmp_path / "flat" / "train.zarr")
    assert rows.shape == (198, 64) and not rows.any()


# --------------------------------------------------------------------------- flipped bits


def test_chunks_are_written_with_zstd_checksums(store: Path) -> None:
    meta = json.loads((store / "train.zarr" / "zarr.json").read_text())
    assert meta["codecs"][-1] == {"name": "zstd", "configuration": {"level": 3, "checksum": True}}


def test_a_flipped_bit_in_a_chunk_is_an_error(store: Path) -> None:
    train = store / "train.zarr"
    chunk = train / "c" / "2" / "0"
    _flip(chunk, _data_offset(chunk), 3)
    with pytest.raises(DataError, match=r"train\.zarr.*chunk 'c/2/0' \(rows 60:90\) is not what "
                       r"lsdask wrote.*damaged.*lsdask patches"):  # fmt: skip
        _load_all(train)
    with pytest.raises(DataError, match=r"chunk 'c/2/0' \(rows 60:90\)"):
        _fit(train)


def test_a_flipped_bit_in_zarr_json_is_an_error(store: Path) -> None:
    """The row count (shape) and the row width: single flips turn 297 into 296
    (rows cut off) or 64 into 65 (another width); both are refused."""
    train = store / "train.zarr"
    text = (train / "zarr.json").read_text()
    for old, new in (("297", "296"), ("    64\n  ]", "    65\n  ]")):
        (train / "zarr.json").write_text(text.replace(old, new, 1))
        with pytest.raises(DataError, match=r"train\.zarr.*(lsdask wrote|not what lsdask)"):
            _load_all(train)
    (train / "zarr.json").write_text(text)
    np.testing.assert_array_equal(_load_all(train), zarr.open_array(str(train))[:])


def test_a_flipped_bit_in_an_older_store_with_zstd_checksums_is_an_error(tmp_path: Path) -> None:
    """Without lsdask's record (a store of another writer), zstd's own checksum
    is what catches a flip; it comes back as a one-line DataError naming the chunk."""
    path = tmp_path / "x.zarr"
    z = zarr.create_array(str(path), shape=(100, 4), chunks=(25, 4), dtype="f4",
                          compressors=zarr.codecs.ZstdCodec(level=3, checksum=True))  # fmt: skip
    z[:] = np.random.default_rng(1).normal(size=(100, 4))
    chunk = path / "c" / "1" / "0"
    _flip(chunk, _data_offset(chunk), 0)
    with pytest.raises(
        DataError,
        match=r"x\.zarr.*chunk 'c/1/0' \(rows 25:50\): could not be "
        r"decoded: Zstd.*checksum.*damaged",
    ) as err:
        _load_all(path)
    assert "\n" not in str(err.value)


def test_a_store_written_before_checksums_still_opens(tmp_path: Path) -> None:
    """What ``lsdask patches`` wrote before: zstd without checksums, no record."""
    path = tmp_path / "old.zarr"
    z = zarr.create_array(str(path), shape=(90, 64), chunks=(30, 64), dtype="float32",
                          fill_value=0.0, zarr_format=3)  # fmt: skip
    z[:] = np.random.default_rng(2).normal(size=(90, 64)).astype("f4")
    z.attrs.update({"patch_size": 8, "stride": 4, "remove_mean": True})
    np.testing.assert_array_equal(_load_all(path), z[:])


def test_rows_appended_to_a_store_are_taken_in_and_the_written_ones_still_checked(
    store: Path,
) -> None:
    """docs/cli.md: a resumed fit takes in chunks appended to the array since."""
    train = store / "train.zarr"
    before = zarr.open_array(str(train))[:]
    extra = np.random.default_rng(3).normal(size=(50, 64)).astype("f4")
    zarr.open_array(str(train), mode="r+").append(extra)
    np.testing.assert_array_equal(_load_all(train), np.concatenate([before, extra]))
    chunk = train / "c" / "0" / "0"
    _flip(chunk, _data_offset(chunk), 5)
    with pytest.raises(DataError, match=r"chunk 'c/0/0' \(rows 0:30\) is not what lsdask wrote"):
        _load_all(train)


def _bit_flip_targets(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file())


def test_bit_flips_over_a_store_never_load_silently(store: Path) -> None:
    """``LSDASK_BITFLIPS`` random single-bit flips over the chunk files and the
    ``zarr.json`` of both arrays; after each, the whole array is loaded as a fit
    loads it: refused with a one-line DataError, or identical to what was
    written (a flip in a field that changes nothing); never different."""
    rng = np.random.default_rng(39)
    targets = _bit_flip_targets(store)
    sizes = np.array([p.stat().st_size for p in targets], dtype=float)
    reference = {name: _load_all(store / name) for name in ("train.zarr", "heldout.zarr")}
    counts = {"silent-different": 0, "refused": 0, "identical": 0, "other": 0}
    failures = []
    for _ in range(FLIPS):
        path = targets[rng.choice(len(targets), p=sizes / sizes.sum())]
        byte, bit = int(rng.integers(path.stat().st_size)), int(rng.integers(8))
        array = path.relative_to(store).parts[0]
        original = _flip(path, byte, bit)
        try:
            rows = _load_all(store / array)
        except DataError as exc:
            kind = "refused" if "\n" not in str(exc) else "other"
        except Exception as exc:  # a traceback where a one-line error is due
            kind, rows = "other", None
            failures.append(f"{path.relative_to(store)} byte {byte} bit {bit}: {exc!r}")
        else:
            same = rows.shape == reference[array].shape and np.array_equal(rows, reference[array])
            kind = "identical" if same else "silent-different"
            if not same:
                failures.append(f"{path.relative_to(store)} byte {byte} bit {bit}: loaded")
        finally:
            path.write_bytes(original)
        counts[kind] += 1
    print(f"\nZarr bit flips ({FLIPS}, chunks and zarr.json): {counts}")
    assert counts["silent-different"] == 0 and counts["other"] == 0, failures[:10]


# --------------------------------------------------------------------------- links, FIFOs


@pytest.mark.parametrize("what", ["chunk", "chunk folder", "zarr.json"])
def test_a_link_inside_a_store_is_refused(store: Path, tmp_path: Path, what: str) -> None:
    """Even a link to an exact copy of the file it replaces: never followed."""
    train = store / "train.zarr"
    outside = tmp_path / "outside"
    outside.mkdir()
    source = zarr_source(train)
    target = {"chunk": train / "c" / "1" / "0", "chunk folder": train / "c" / "1",
              "zarr.json": train / "zarr.json"}[what]  # fmt: skip
    copy = outside / target.name
    os.rename(target, copy)
    target.symlink_to(copy)
    before = _tree_digest(outside)
    with pytest.raises(DataError, match=r"is a symbolic link|passes through '1', a symbolic link"):
        zarr_source(train)
    with pytest.raises(DataError, match="symbolic link"):
        for batch in source.batches:  # a batch's own read, opened before the link came
            batch.load()
    assert _tree_digest(outside) == before


def test_a_fifo_or_device_as_zarr_json_is_refused_without_hanging(store: Path) -> None:
    train = store / "train.zarr"
    (train / "zarr.json").unlink()
    os.mkfifo(train / "zarr.json")
    run = _lsdask("fit-gmm", train, "--components", "2", "--laps", "1", "--sync")
    assert "'zarr.json' is a FIFO" in _one_line_error(run)
    (train / "zarr.json").unlink()
    (train / "zarr.json").symlink_to("/dev/zero")
    with pytest.raises(DataError, match=r"'zarr\.json' is a symbolic link"):
        _load_all(train)


def test_an_oversized_zarr_json_is_refused_before_it_is_read(store: Path) -> None:
    train = store / "train.zarr"
    os.truncate(train / "zarr.json", 65 << 20)  # sparse: no disk, a size over the limit
    with pytest.raises(DataError, match=r"'zarr\.json' holds 68,157,440 bytes, more than"):
        _load_all(train)


# --------------------------------------------------------------------------- lsdask patches


@pytest.fixture
def images(tmp_path: Path) -> Path:
    folder = tmp_path / "images"
    folder.mkdir()
    for i, pixels in enumerate(_images(np.random.default_rng(5), 3)):
        Image.fromarray(pixels).save(folder / f"img{i}.png")
    return folder


def test_patches_refuses_images_that_are_links_or_special_files(
    images: Path, tmp_path: Path
) -> None:
    """A link to an image outside the folder, a FIFO and a link to /dev/zero
    named like images: refused, listed, nothing read or written (no hang)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    Image.fromarray(_images(np.random.default_rng(6), 1)[0]).save(outside / "secret.png")
    (images / "sub").mkdir()
    (images / "sub" / "linked.png").symlink_to(outside / "secret.png")
    os.mkfifo(images / "sub" / "fifo.png")
    (images / "zero.jpg").symlink_to("/dev/zero")
    run = _lsdask("patches", images, "--out", tmp_path / "out", "--batch-size", "50")
    message = _one_line_error(run)
    for listed in ("'sub/fifo.png' (a FIFO)", "'sub/linked.png' (a symbolic link)",
                   "'zero.jpg' (a symbolic link)", "cp -L"):  # fmt: skip
        assert listed in message
    assert not (tmp_path / "out").exists()


def test_load_image_refuses_a_fifo_or_device_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.png")
    with _no_hang(), pytest.raises(ValueError, match="it is a FIFO, not a regular file"):
        load_image(tmp_path / "x.png")
    with _no_hang(), pytest.raises(ValueError, match="it is a device, not a regular file"):
        load_image("/dev/zero")


def test_patches_skips_a_linked_folder_with_a_warning(images: Path, tmp_path: Path, capsys) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    Image.fromarray(_images(np.random.default_rng(7), 1)[0]).save(outside / "more.png")
    (images / "linked").symlink_to(outside)
    code = main(["patches", str(images), "--out", str(tmp_path / "out"), "--batch-size", "50",
                 "--heldout-fraction", "0"])  # fmt: skip
    assert code == 0
    assert "skipped 1 links" in capsys.readouterr().err
    assert zarr.open_array(str(tmp_path / "out" / "train.zarr")).attrs["n_images"] == 3


@pytest.mark.parametrize("planted", ["out is a link", "train.zarr is a link", "train.zarr file"])
def test_patches_writes_nothing_outside_its_output_folder(
    images: Path, tmp_path: Path, planted: str, capsys
) -> None:
    outside = tmp_path / "outside"
    (outside / "train.zarr").mkdir(parents=True)
    (outside / "train.zarr" / "keep.txt").write_text("not lsdask's")
    out = tmp_path / "out"
    if planted == "out is a link":
        out.symlink_to(outside)
    else:
        out.mkdir()
        if planted == "train.zarr is a link":
            (out / "train.zarr").symlink_to(outside / "train.zarr")
        else:
            (out / "train.zarr").write_text("a file, not a Zarr folder")
    before, out_before = _tree_digest(outside), _tree_digest(out) if out.is_dir() else None
    with _no_hang():
        code = main(["patches", str(images), "--out", str(out), "--batch-size", "50"])
    message = capsys.readouterr().err
    assert code == 2 and message.count("\n") == 1, message
    assert "link" in message or "not a patch store's" in message
    assert _tree_digest(outside) == before
    assert out.is_symlink() == (planted == "out is a link")
    if not out.is_symlink():
        assert _tree_digest(out) == out_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["images", "out", "outside"]
