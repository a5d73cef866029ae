"""The working copy of a checkpoint folder in a store: committed after each
checkpoint, rebuilt on another machine, one writer at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lsdask.io.stores import CommitConflict
from lsdask.persist.checkpoint_store import StoreMirror


def _machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str) -> None:
    """Working copies from here on live under ``tmp_path/name`` (another machine's disk)."""
    monkeypatch.setenv("LSDASK_STORE_COPIES", str(tmp_path / name))


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_checkpoint_is_rebuilt_on_another_machine(
    store: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _machine(monkeypatch, tmp_path, "first")
    mirror = StoreMirror(*store)
    folder = mirror.pull()
    assert _files(folder) == {}
    (folder / "memo").mkdir()
    (folder / "memo" / "b000000-r-1.npz").write_bytes(b"memo")
    (folder / "LATEST").write_text("ckpt-00001\n")
    (folder / ".lsdask.lock").write_text("pid 1")  # stays local
    (folder / ".tmp-ckpt-00002").mkdir()  # a checkpoint being written: stays local
    assert mirror.push().number == 1
    _machine(monkeypatch, tmp_path, "second")
    other = StoreMirror(*store)
    rebuilt = other.pull()
    assert rebuilt != folder
    got = _files(rebuilt)
    got.pop(".lsdask-store-version.json")
    assert got == {"memo/b000000-r-1.npz": b"memo", "LATEST": b"ckpt-00001\n"}


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_copy_that_is_the_newest_version_is_kept(
    store: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _machine(monkeypatch, tmp_path, "one")
    mirror = StoreMirror(*store)
    folder = mirror.pull()
    (folder / "LATEST").write_text("a\n")
    mirror.push()
    (folder / "written-after-the-push").write_text("x")  # a lap the fit did not commit
    again = StoreMirror(*store)
    assert again.pull() == folder and (folder / "written-after-the-push").exists()


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_two_fits_on_one_location_the_second_commit_is_refused(
    store: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _machine(monkeypatch, tmp_path, "a")
    a = StoreMirror(*store)
    (a.pull() / "LATEST").write_text("a\n")
    a.push()
    _machine(monkeypatch, tmp_path, "b")
    b = StoreMirror(*store)
    b.pull()
    (a.folder / "LATEST").write_text("a2\n")
    a.push()
    (b.folder / "LATEST").write_text("b\n")
    with pytest.raises(CommitConflict, match="one writer"):
        b.push()
