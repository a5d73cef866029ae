"""The commit protocol on stores: URLs and options, exclusive creates, numbered
versions, on ``memory://`` and a real S3 API server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from typing import Any

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from lsdask.errors import DataError
from lsdask.io.stores import (
    CommitConflict,
    ConditionalWritesUnsupported,
    VersionLog,
    create_exclusive,
    open_location,
    parse_storage_options,
)
from lsdask.io.stores.exclusive import check_conditional_writes
from lsdask.io.stores.location import redact
from tests.s3_server import s3_options


def _log(url: str, options: dict[str, Any]) -> VersionLog:
    return VersionLog(open_location(url, options))


# -- locations and options -----------------------------------------------------


def test_storage_options_parse_scalars_and_nest() -> None:
    got = parse_storage_options(
        ["anon=true", "client_kwargs.endpoint_url=http://h:9000", "block_size=5", "key=abc"]
    )
    assert got == {
        "anon": True,
        "client_kwargs": {"endpoint_url": "http://h:9000"},
        "block_size": 5,
        "key": "abc",
    }


@pytest.mark.parametrize("pair", ["anon", "=x", "a..b=1"])
def test_storage_option_without_key_value_is_refused(pair: str) -> None:
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_storage_options([pair])


def test_storage_option_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="given twice"):
        parse_storage_options(["anon=true", "anon=false"])


def test_unknown_protocol_names_the_parameter() -> None:
    with pytest.raises(ValueError, match=r"corpus: nosuch://x.*s3://bucket/prefix"):
        open_location("nosuch://x", parameter="corpus")


def test_credentials_in_a_url_are_not_printed() -> None:
    assert redact("s3://AKIA:secret@bucket/p") == "s3://bucket/p"
    assert redact("/local/path") == "/local/path"


@pytest.mark.parametrize("name", ["..", ".", "a/b", "", "a\\b"])
def test_names_below_a_location_stay_below_it(name: str) -> None:
    location = open_location(f"memory://lsdask-{uuid.uuid4().hex}")
    with pytest.raises(ValueError, match="not a plain name"):
        location.path(name)


# -- exclusive creates ---------------------------------------------------------


def test_create_exclusive_keeps_the_first_object(store: tuple[str, dict[str, Any]]) -> None:
    location = open_location(*store)
    path = location.path("one")
    assert create_exclusive(location.fs, path, b"first")
    assert not create_exclusive(location.fs, path, b"second")
    assert location.fs.cat_file(path) == b"first"


def test_local_folders_keep_the_local_protocol(tmp_path: Any) -> None:
    location = open_location(str(tmp_path))
    with pytest.raises(ValueError, match="local protocol"):
        create_exclusive(location.fs, location.path("x"), b"1")
    with pytest.raises(ValueError, match="the version log is for object stores"):
        VersionLog(location)
    assert os.listdir(tmp_path) == []


class _Overwriting(MemoryFileSystem):
    """A store that ignores the create-only condition and overwrites (as an
    S3-compatible server without conditional writes does)."""

    protocol = ("overwriting",)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        super().pipe_file(path, value, **kwargs)


def test_a_store_that_overwrites_is_refused() -> None:
    fsspec.register_implementation("overwriting", _Overwriting, clobber=True)
    location = open_location(f"overwriting://lsdask-{uuid.uuid4().hex}")
    import lsdask.io.stores.exclusive as exclusive

    exclusive.CONDITIONAL_PROTOCOLS = exclusive.CONDITIONAL_PROTOCOLS | {"overwriting"}
    try:
        with pytest.raises(ConditionalWritesUnsupported, match="accepted a second create"):
            check_conditional_writes(location)
        check_conditional_writes(location, single_writer=True)  # the caller vouches
    finally:
        exclusive.CONDITIONAL_PROTOCOLS = exclusive.CONDITIONAL_PROTOCOLS - {"overwriting"}


def test_a_protocol_without_conditional_creates_is_refused() -> None:
    fsspec.register_implementation("overwriting", _Overwriting, clobber=True)
    log = VersionLog(open_location(f"overwriting://lsdask-{uuid.uuid4().hex}"))
    with pytest.raises(ConditionalWritesUnsupported, match="single_writer=True"):
        log.commit({"n": 1}, None)
    single = VersionLog(log.location, single_writer=True)
    first = single.commit({"n": 1}, None)
    with pytest.raises(CommitConflict):  # a single writer still sees a taken number
        single.commit({"n": 2}, None)
    assert single.latest() == first


# -- versions --------------------------------------------------------------------


def test_versions_commit_in_order_and_read_back(store: tuple[str, dict[str, Any]]) -> None:
    log = _log(*store)
    assert log.latest() is None and log.numbers() == []
    first = log.commit({"parts": ["a"]}, None)
    second = log.commit({"parts": ["a", "b"]}, first)
    assert (first.number, second.number) == (1, 2)
    again = _log(*store)  # another reader, no state shared
    assert again.latest() == second
    assert again.read(1).content == {"parts": ["a"]}
    assert again.numbers() == [1, 2]


def test_two_writers_of_one_version_one_wins(store: tuple[str, dict[str, Any]]) -> None:
    a, b = _log(*store), _log(*store)
    base = a.commit({"parts": []}, None)
    a.commit({"parts": ["a"]}, base)
    with pytest.raises(CommitConflict, match="version 2 was committed by another writer"):
        b.commit({"parts": ["b"]}, base)
    assert b.latest().content == {"parts": ["a"]}


def _append(item: str) -> Any:
    def change(parent: Any) -> dict[str, Any]:
        parts = [] if parent is None else parent.content["parts"]
        return {"parts": [*parts, item]}

    return change


def test_concurrent_updates_keep_every_change_once(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    items = [f"t{t}-{i}" for t in range(4) for i in range(5)]

    def writer(t: int) -> None:
        log = _log(url, options)
        for i in range(5):
            log.update(_append(f"t{t}-{i}"))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = _log(url, options)
    latest = log.latest()
    assert sorted(latest.content["parts"]) == sorted(items)
    assert log.numbers() == list(range(1, len(items) + 1))


def test_readers_see_whole_versions_while_writers_commit() -> None:
    url = f"memory://lsdask-test-{uuid.uuid4().hex}"
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        log = _log(url, {})
        while not done.is_set():
            try:
                v = log.latest()
            except BaseException as exc:
                errors.append(exc)
                return
            if v is not None:
                assert len(v.content["parts"]) == v.number
                seen.append(v.number)

    thread = threading.Thread(target=reader)
    thread.start()
    log = _log(url, {})
    for i in range(30):
        log.update(_append(f"p{i}"))
    done.set()
    thread.join()
    assert not errors
    assert seen == sorted(seen)  # never an older version after a newer one


_WRITER = """
import json, sys
from lsdask.io.stores import VersionLog, open_location
url, options, tag, n = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
log = VersionLog(open_location(url, options))
for i in range(n):
    log.update(lambda p, i=i: {"parts": ([] if p is None else p.content["parts"]) + [f"{tag}{i}"]})
"""


@pytest.mark.slow
def test_two_processes_append_at_once(s3_bucket: str, s3_endpoint: str) -> None:
    url, options = f"{s3_bucket}/p", s3_options(s3_endpoint)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, json.dumps(options), tag, "8"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    latest = _log(url, options).latest()
    expected = [f"{t}{i}" for t in "ab" for i in range(8)]
    assert sorted(latest.content["parts"]) == sorted(expected)
    assert latest.number == 16


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_lagging_or_bad_hint_costs_no_version(store: tuple[str, dict[str, Any]]) -> None:
    log = _log(*store)
    v = None
    for i in range(3):
        v = log.commit({"i": i}, v)
    fs, hint = log.location.fs, log.location.path("_versions", "LATEST")
    for text in (b"1", b"not a number", b"99"):
        fs.pipe_file(hint, text)
        assert log.latest().number == 3, text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(content={"i": 9}), "SHA-256 does not match"),
        (lambda d: d.update(version=7), "says it is version 7"),
        (lambda d: d.update(format="other"), "not an lsdask-version document"),
    ],
)
@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_damaged_version_is_named(
    store: tuple[str, dict[str, Any]], edit: Any, message: str
) -> None:
    log = _log(*store)
    log.commit({"i": 1}, None)
    path = log.location.path("_versions", "0000000001.json")
    doc = json.loads(log.location.fs.cat_file(path))
    edit(doc)
    log.location.fs.rm_file(path)
    log.location.fs.pipe_file(path, json.dumps(doc).encode())
    with pytest.raises(DataError, match=f"0000000001.json: .*{message}"):
        log.latest()


def test_a_version_that_is_not_json_is_named() -> None:
    log = _log(f"memory://lsdask-test-{uuid.uuid4().hex}", {})
    log.commit({"i": 1}, None)
    path = log.location.path("_versions", "0000000001.json")
    log.location.fs.rm_file(path)
    log.location.fs.pipe_file(path, b"{torn")
    with pytest.raises(DataError, match=r"0000000001\.json: the version document is damaged"):
        log.read(1)


def test_objects_are_immutable_and_named_by_lsdask(store: tuple[str, dict[str, Any]]) -> None:
    log = _log(*store)
    name = log.put_object(b"payload", ".parquet")
    assert name.startswith("objects/") and name.endswith(".parquet")
    assert log.read_object(name, 100) == b"payload"
    with pytest.raises(DataError, match=r"limit|more than"):
        log.read_object(name, 3)
    with pytest.raises(DataError, match="not the name of an object"):
        log.read_object("../etc/passwd", 100)


def test_unreferenced_objects_are_removed_after_the_grace_period(
    store: tuple[str, dict[str, Any]],
) -> None:
    log = _log(*store)
    kept = log.put_object(b"kept")
    orphan = log.put_object(b"orphan")
    log.commit({"objects": [kept]}, None)
    assert log.remove_unreferenced([kept], older_than_s=3600) == []  # a writer may be mid-commit
    assert log.remove_unreferenced([kept], older_than_s=-1) == [orphan]
    assert log.read_object(kept, 10) == b"kept"
    with pytest.raises(FileNotFoundError):
        log.read_object(orphan, 10)
