"""A local folder (a model, a checkpoint) committed to a store as versions and
rebuilt from them: exact, incremental, checked."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from lsdask.errors import DataError
from lsdask.io.stores import (
    CommitConflict,
    VersionLog,
    download_folder,
    open_location,
    upload_folder,
)
from tests.s3_server import s3_options


@pytest.fixture(params=["memory", "s3"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> VersionLog:
    if request.param == "memory":
        return VersionLog(open_location(f"memory://lsdask-folder-{uuid.uuid4().hex}"))
    bucket = request.getfixturevalue("s3_bucket")
    options = s3_options(request.getfixturevalue("s3_endpoint"))
    return VersionLog(open_location(f"{bucket}/model", options))


def _folder(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _read(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)).replace(os.sep, "/"): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


FILES = {"params.json": b'{"k": 3}', "arrays/topics.npz": os.urandom(5000), "vocab.txt": b"a\nb\n"}


def test_a_folder_comes_back_exactly(log: VersionLog, tmp_path: Path) -> None:
    src = _folder(tmp_path / "src", FILES)
    version = upload_folder(log, src, {"what": "model"})
    assert version.number == 1 and version.content["what"] == "model"
    back = download_folder(log, log.latest(), tmp_path / "back")
    assert _read(back) == FILES


def test_unchanged_files_keep_their_objects(log: VersionLog, tmp_path: Path) -> None:
    src = _folder(tmp_path / "src", FILES)
    first = upload_folder(log, src)
    (src / "params.json").write_bytes(b'{"k": 4}')
    second = upload_folder(log, src)
    objects = [{f["path"]: f["object"] for f in v.content["files"]} for v in (first, second)]
    assert objects[0]["arrays/topics.npz"] == objects[1]["arrays/topics.npz"]
    assert objects[0]["params.json"] != objects[1]["params.json"]
    assert _read(download_folder(log, log.read(1), tmp_path / "v1")) == FILES
    assert _read(download_folder(log, log.read(2), tmp_path / "v2"))["params.json"] == b'{"k": 4}'


@pytest.mark.parametrize("log", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_second_writer_is_told(log: VersionLog, tmp_path: Path) -> None:
    src = _folder(tmp_path / "src", FILES)
    upload_folder(log, src)
    other = VersionLog(log.location)
    stale = log.latest()
    upload_folder(log, src)
    with pytest.raises(CommitConflict, match="committed by another writer"):
        other.commit({"kind": "folder", "files": []}, stale)
    with pytest.raises(CommitConflict, match="one writer"):
        _race(other, src, stale)


def _race(log: VersionLog, src: Path, stale: Any) -> None:
    """upload_folder as a writer that read ``stale`` before the other committed."""
    original = log.latest
    log.latest = lambda: stale  # type: ignore[method-assign]
    try:
        upload_folder(log, src)
    finally:
        log.latest = original  # type: ignore[method-assign]


@pytest.mark.parametrize("log", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_damaged_object_is_caught_on_download(log: VersionLog, tmp_path: Path) -> None:
    src = _folder(tmp_path / "src", FILES)
    version = upload_folder(log, src)
    entry = next(f for f in version.content["files"] if f["path"] == "vocab.txt")
    path = log.location.path(*entry["object"].split("/"))
    log.location.fs.rm_file(path)
    log.location.fs.pipe_file(path, b"a\nc\n")
    with pytest.raises(DataError, match=r"vocab\.txt came back with 4 bytes and another digest"):
        download_folder(log, version, tmp_path / "back")


@pytest.mark.parametrize("log", ["memory"], indirect=True)  # S3 adds nothing here
@pytest.mark.parametrize("rel", ["../outside", "a/../../b", "/abs", "a//b", ""])
def test_a_crafted_file_list_cannot_write_outside(
    log: VersionLog, tmp_path: Path, rel: str
) -> None:
    src = _folder(tmp_path / "src", {"x": b"1"})
    version = upload_folder(log, src)
    files = [{**version.content["files"][0], "path": rel}]
    crafted = log.commit({"kind": "folder", "files": files}, version)
    with pytest.raises(DataError, match="not a path below the folder"):
        download_folder(log, crafted, tmp_path / "back")
    assert not (tmp_path / "outside").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("log", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_link_in_the_folder_is_refused(log: VersionLog, tmp_path: Path) -> None:
    src = _folder(tmp_path / "src", {"x": b"1"})
    (src / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DataError, match="not a regular file"):
        upload_folder(log, src)


@pytest.mark.parametrize("log", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_version_that_is_not_a_folder_is_refused(log: VersionLog, tmp_path: Path) -> None:
    version = log.commit({"kind": "corpus"}, None)
    with pytest.raises(DataError, match="not a folder version"):
        download_folder(log, version, tmp_path / "back")


@pytest.mark.parametrize("log", ["memory"], indirect=True)  # S3 adds nothing here
def test_known_digests_skip_unchanged_files_not_changed_ones(
    log: VersionLog, tmp_path: Path
) -> None:
    src = _folder(tmp_path / "src", FILES)
    known: dict[str, tuple[int, int, str]] = {}
    upload_folder(log, src, known=known)
    assert set(known) == set(FILES)
    (src / "params.json").write_bytes(b'{"k": 9}')  # same size, new content
    os.utime(src / "params.json", ns=(1, 1))
    second = upload_folder(log, src, known=known)
    back = download_folder(log, second, tmp_path / "back")
    assert _read(back)["params.json"] == b'{"k": 9}'
