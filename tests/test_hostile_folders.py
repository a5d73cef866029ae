"""Hostile folders: nothing outside a handed folder is touched, nothing inside it is trusted.

For every command that takes a folder (``ingest --append-to``, ``fit --out``,
``fit --checkpoint`` into a new folder, ``fit --resume`` run again on its finished
checkpoint, ``transform``, ``topics --corpus``,
``fit-gmm``, ``patches``, and Python's ``load_model``/``load_lda``), a small valid
folder is copied and one entry that the command reads or writes there is replaced by
a hostile one:

``file-link`` / ``dir-link``
    a symbolic link to a file / a folder outside (the same entry of a twin folder
    outside where there is one: another corpus's ``parts/``, another checkpoint's
    ``memo/``; else a file with content, or a folder of files);
``dangling``
    a link to a name outside that does not exist;
``loop``
    a link to itself;
``fifo``
    a named pipe (a reader that opens it blocks);
``device``
    the character device /dev/zero (``mknod``; a link to /dev/zero where that is
    not allowed);

or a JSON field that names a file (a manifest's ``batches[].file``, ``pending[].file``
and ``pending[].txn``, a checkpoint's ``LATEST``, ``state.json``'s memo names, a
saved model's array names) is crafted to hold an ``absolute`` path, a ``dotdot``
path (``../`` up and out), a ``long`` name (300+ characters) or a ``newline``.

Each case runs the real command in a child process (``python -m lsdask``, or
tests/hostile_folders_child.py for the Python loaders) under an address-space limit
(:data:`ADDRESS_SPACE`) and a timeout (a FIFO must not hang it), and then asserts:

- nothing outside changed: every file, folder and link of the surrounding
  ``outside/`` tree (the links' targets among them) has the same type, size, time
  and content, none appeared or vanished, and nothing appeared beside it;
- the command ended with status 0, or with an error status and one
  ``lsdask: error:`` line, without a Python traceback;
- no temporary was left: no hidden entry appeared in the working folder or below
  it, and nothing beside the outputs the command names.

CI runs :data:`SAMPLE`, which covers every command and every kind at least once (and
the issue's findings); ``LSDASK_HOSTILE_FOLDERS=all`` runs every generated case.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.lsdask_processes import lsdask_env, run_lsdask

ROOT = Path(__file__).resolve().parents[1]
#: the child's address space: room for numba, pyarrow and a small model, not for
#: reading /dev/zero whole or inflating a crafted header
ADDRESS_SPACE = 4 << 30
TIMEOUT = 90  # seconds per case; a command of these sizes takes a few
ALL = os.environ.get("LSDASK_HOSTILE_FOLDERS") == "all"

LINK_KINDS = ("file-link", "dir-link", "dangling", "loop", "fifo", "device")
FIELD_KINDS = ("absolute", "dotdot", "long", "newline")
KINDS = LINK_KINDS + FIELD_KINDS

# the entries of each pristine folder lsdask reads or writes (None: a folder);
# names the commands create are listed too (a hostile entry waits there)
CORPUS_ENTRIES = (
    ".lsdask.lock", "manifest.json", "vocab.txt", "parts/", "parts/part-00000.parquet",
    "parts/part-00001.parquet", "parts/part-00002.parquet", "quarantine/",
)  # fmt: skip
MODEL_ENTRIES = ("params.json", "arrays.npz", "vocab.txt", "elbo.png", "elbo_time.png")
GMM_ENTRIES = ("params.json", "arrays.npz")
ZARR_ENTRIES = ("zarr.json", "c/", "c/0/", "c/0/0", "c/1/0")
IMAGE_ENTRIES = ("img0.png", "img1.png", "img3.png")
PATCH_STORE_ENTRIES = ("train.zarr/", "heldout.zarr/", "train.zarr/zarr.json", "train.zarr/c/0/0")
NEW_CHECKPOINT_ENTRIES = (".lsdask.lock", "LATEST", "memo/")


# -- the pristine folders -----------------------------------------------------------------


def _jsonl(path: Path, ids: range, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = [f"{a}{b}" for a in ("apple", "river", "stone", "cloud", "field")
             for b in ("ward", "light", "berg", "ton", "wood")]  # fmt: skip
    with open(path, "w") as f:
        for i in ids:
            text = " ".join(rng.choice(words, size=int(rng.integers(5, 20))))
            f.write(json.dumps({"id": i, "text": text}) + "\n")


FIT = ("--topics", "3", "--laps", "1", "--sync", "--init", "random", "--seed", "0")
FIT_AGAIN = ("fit", "c", *FIT, "--resume", "ck", "--out", "m", "--overwrite")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A corpus of two parts (c), a checkpoint (ck) and the model (m) of one fit over
    it, four images (img), their patch store (p), a GMM fitted to it (g), and the
    documents one append adds (extra.jsonl)."""
    from PIL import Image

    root = tmp_path_factory.mktemp("pristine")
    _jsonl(root / "docs.jsonl", range(120), 1)
    _jsonl(root / "more.jsonl", range(120, 160), 2)
    _jsonl(root / "extra.jsonl", range(200, 230), 3)
    steps = [
        ("ingest", "jsonl", root / "docs.jsonl", "--id", "id", "--out", root / "c",
         "--docs-per-row-group", "60"),
        ("ingest", "jsonl", root / "more.jsonl", "--id", "id", "--append-to", root / "c"),
    ]  # fmt: skip
    (root / "img").mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):
        pixels = (rng.random((40, 48)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(root / "img" / f"img{i}.png")
    steps += [
        ("patches", root / "img", "--out", root / "p", "--patch-size", "8", "--seed", "0",
         "--batch-size", "100"),
        ("fit-gmm", root / "p" / "train.zarr", "--components", "3", "--laps", "1", "--sync",
         "--save", root / "g"),
    ]  # fmt: skip
    for args in steps:
        run = run_lsdask(*args)
        assert run.returncode == 0, (args, run.stderr[-3000:])
    # the fit whose checkpoint a case runs again: the same arguments, from the same
    # folder (a case runs each command in its working folder, with these relative names)
    run = subprocess.run([sys.executable, "-m", "lsdask", *FIT_AGAIN], cwd=root,
                         capture_output=True, text=True, env=lsdask_env(), timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    for name in ("docs.jsonl", "more.jsonl"):
        (root / name).unlink()
    return root


# -- the commands -------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A command over folders copied from the pristine ones into ``work``."""

    name: str
    folders: tuple[str, ...]  # copied from pristine into work (".." names: made empty)
    # the arguments, given the working folder's name in them (cases run in the working
    # folder and give Path(""): relative names); or ["python:FUNCTION", folder]
    argv: Callable[[Path], list]
    entries: tuple[tuple[str, str], ...]  # (folder below work, entry) made hostile
    fields: tuple[str, ...]  # crafted JSON fields (see _craft)
    outputs: tuple[str, ...] = ()  # names the command may create in work


def _with(folder: str, names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((folder, n) for n in names)


CORPUS_FIELDS = ("batches.file", "pending.file", "pending.txn")
CHECKPOINT_FIELDS = ("LATEST", "state.memo")
MODEL_FIELDS = ("params.arrays",)

COMMANDS = {
    c.name: c
    for c in [
        Command("append", ("c", "extra.jsonl"),
                lambda w: ["ingest", "jsonl", w / "extra.jsonl", "--id", "id", "--append-to",
                           w / "c"],
                _with("c", CORPUS_ENTRIES), CORPUS_FIELDS),
        Command("fit-out", ("c", "m"),
                lambda w: ["fit", w / "c", *FIT, "--out", w / "m", "--overwrite"],
                _with("c", CORPUS_ENTRIES) + _with("m", MODEL_ENTRIES), CORPUS_FIELDS,
                ("m",)),
        Command("fit-checkpoint", ("c",),
                lambda w: ["fit", w / "c", *FIT, "--checkpoint", w / "ck", "--out", w / "m2"],
                _with("ck", NEW_CHECKPOINT_ENTRIES), (), ("ck", "m2")),
        Command("fit-resume", ("c", "ck", "m"),
                lambda w: list(FIT_AGAIN),
                _with("ck", (".lsdask.lock", "LATEST", "CKPT/", "CKPT/state.json", "memo/",
                             "MEMO0", "MEMO1")),
                CHECKPOINT_FIELDS, ("m",)),
        Command("transform", ("c", "m"),
                lambda w: ["transform", w / "m", w / "c", "--out", w / "w.parquet",
                           "--overwrite", "--sync"],
                _with("c", CORPUS_ENTRIES[:7]) + _with("m", MODEL_ENTRIES[:3])
                + _with(".", ("w.parquet",)), CORPUS_FIELDS + MODEL_FIELDS, ("w.parquet",)),
        Command("topics", ("c", "m"),
                lambda w: ["topics", w / "m", "--corpus", w / "c"],
                _with("c", CORPUS_ENTRIES[:7]) + _with("m", MODEL_ENTRIES[:3]),
                CORPUS_FIELDS + MODEL_FIELDS),
        Command("fit-gmm", ("p", "g"),
                lambda w: ["fit-gmm", w / "p" / "train.zarr", "--components", "3", "--laps",
                           "1", "--sync", "--save", w / "g", "--overwrite"],
                _with("p/train.zarr", ZARR_ENTRIES) + _with("g", GMM_ENTRIES), (), ("g",)),
        Command("patches", ("img", "p"),
                lambda w: ["patches", w / "img", "--out", w / "p", "--patch-size", "8",
                           "--seed", "0", "--batch-size", "100"],
                _with("img", IMAGE_ENTRIES) + _with("p", PATCH_STORE_ENTRIES), (), ("p",)),
        Command("load_model", ("m",), lambda w: ["python:load_model", w / "m"],
                _with("m", MODEL_ENTRIES[:3]), MODEL_FIELDS),
        Command("load_lda", ("m",), lambda w: ["python:load_lda", w / "m"],
                _with("m", MODEL_ENTRIES[:3]), MODEL_FIELDS),
    ]
}  # fmt: skip


@dataclass(frozen=True)
class Case:
    command: str
    folder: str  # below work ("." for work itself); for a field: the field
    entry: str  # the entry's name below folder, or the crafted field
    kind: str

    @property
    def id(self) -> str:
        where = f"{self.folder}/{self.entry}".replace("/", "|").rstrip("|")
        return f"{self.command}:{where}:{self.kind}"


def all_cases() -> list[Case]:
    cases = []
    for command in COMMANDS.values():
        for folder, entry in command.entries:
            cases += [Case(command.name, folder, entry, kind) for kind in LINK_KINDS]
        for field in command.fields:
            cases += [Case(command.name, "field", field, kind) for kind in FIELD_KINDS]
    return cases


#: CI's cases: the issue's findings, then every command and every kind at least once
SAMPLE = [
    Case("append", "c", ".lsdask.lock", "file-link"),  # a lock link emptied its target
    Case("transform", "c", ".lsdask.lock", "dangling"),  # ... or created it outside
    Case("fit-out", "field", "pending.file", "absolute"),  # recovery moved a file outside
    Case("topics", "field", "pending.txn", "dotdot"),  # ... or overwrote one
    Case("fit-resume", "ck", "memo/", "dir-link"),  # another checkpoint's memo
    Case("append", "c", "parts/", "dir-link"),  # appends written into another corpus
    Case("fit-resume", "ck", "LATEST", "device"),  # /dev/zero read whole
    Case("fit-out", "c", "manifest.json", "fifo"),  # a FIFO hung the command
    Case("fit-checkpoint", "ck", "LATEST", "file-link"),
    Case("fit-resume", "field", "state.memo", "long"),
    Case("transform", "field", "batches.file", "newline"),
    Case("fit-gmm", "p/train.zarr", "c/0/0", "loop"),
    Case("patches", "img", "img0.png", "device"),
    Case("patches", "p", "train.zarr/", "dir-link"),
    Case("load_model", "m", "params.json", "loop"),
    Case("load_lda", "m", "arrays.npz", "fifo"),
    Case("load_model", "field", "params.arrays", "dotdot"),
    Case("fit-resume", "field", "LATEST", "absolute"),
]

CASES = all_cases() if ALL else SAMPLE


def test_the_sample_covers_every_command_and_every_kind() -> None:
    everything = {c.id for c in all_cases()}
    assert {c.id for c in SAMPLE} <= everything
    assert {c.command for c in SAMPLE} == set(COMMANDS)
    assert {c.kind for c in SAMPLE} == set(KINDS)


# -- making a case ------------------------------------------------------------------------


def _checkpoint_names(ck: Path) -> dict[str, str]:
    """CKPT, MEMO0, MEMO1: the checkpoint's own names for its state folder and memo files."""
    latest = (ck / "LATEST").read_text().strip()
    memo = sorted(p.name for p in (ck / "memo").iterdir())
    return {"CKPT": latest, "MEMO0": f"memo/{memo[0]}", "MEMO1": f"memo/{memo[1]}"}


def _resolve(entry: str, names: dict[str, str]) -> str:
    parts = entry.split("/")
    parts[0] = names.get(parts[0], parts[0])
    return "/".join(parts)


def _replace_with(path: Path, kind: str, twin: Path, outside: Path) -> None:
    """Put the hostile entry ``kind`` at ``path`` (removing what is there)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file-link":
        target = twin if twin.is_file() and twin.stat().st_size else outside / "target.txt"
        path.symlink_to(target)
    elif kind == "dir-link":
        path.symlink_to(twin if twin.is_dir() else outside / "dir")
    elif kind == "dangling":
        path.symlink_to(outside / "missing")
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 5))
        except PermissionError:
            path.symlink_to("/dev/zero")
    else:
        raise AssertionError(kind)


def _craft(work: Path, outside: Path, field: str, kind: str, names: dict[str, str]) -> None:
    def rel_out(p: Path) -> str:
        return str(p.relative_to(outside))

    def value(target: Path, up: int, inside: str) -> str:
        if kind == "absolute":
            return str(target)
        if kind == "dotdot":
            return "../" * up + "outside/" + rel_out(target)
        if kind == "long":
            stem, _, suffix = inside.rpartition(".")
            return f"{stem}{'x' * 300}.{suffix}" if stem else inside + "x" * 300
        return inside + "\n../../outside/target.txt"

    if field.startswith(("batches.", "pending.")):
        path = work / "c" / "manifest.json"
        doc = json.loads(path.read_text())
        if field == "batches.file":
            # up from c/: work, then the case's folder
            doc["batches"][0]["file"] = value(
                outside / "c" / "parts" / "part-00000.parquet", 2, "parts/part-00000.parquet"
            )
        elif field == "pending.file":
            file = value(outside / "target.txt", 2, "parts/x.parquet")
            doc["pending"] = [{"txn": "0123456789abcdef0123456789abcdef", "file": file,
                               "pid": 1, "host": "elsewhere",
                               "started": "2026-01-01T00:00:00+00:00"}]  # fmt: skip
        else:
            # an unreadable file (vocab.txt is no Parquet) is set aside as
            # quarantine/vocab.<txn>.txt; a folder quarantine/vocab.x/ (the folder's
            # owner can make one) lets the ../ climb out: to quarantine, c, work, the case
            txn = {
                "absolute": "x" + "/.." * 40 + str(outside / "target"),
                "dotdot": "x/../../../../outside/target",
                "long": "t" * 300,
                "newline": "t\n/../../../../outside/target",
            }[kind]
            first = txn.split("/")[0]
            if len(first) < 200:
                (work / "c" / "quarantine" / f"vocab.{first}").mkdir(parents=True)
            doc["pending"] = [{"txn": txn, "file": "vocab.txt", "pid": 1, "host": "elsewhere",
                               "started": "2026-01-01T00:00:00+00:00"}]  # fmt: skip
        path.write_text(json.dumps(doc, indent=1))
    elif field == "LATEST":
        ckpt = names["CKPT"]
        (work / "ck" / "LATEST").write_text(value(outside / "ck" / ckpt, 2, ckpt) + "\n")
    elif field == "state.memo":
        path = work / "ck" / names["CKPT"] / "state.json"
        doc = json.loads(path.read_text())
        for key, name in doc["memo"].items():
            # resolved in ck/memo: up to ck, work, the case's folder
            doc["memo"][key] = value(outside / "ck" / "memo" / name, 3, name)
        path.write_text(json.dumps(doc, indent=1))
    elif field == "params.arrays":
        path = work / "m" / "params.json"
        doc = json.loads(path.read_text())
        doc["arrays"][0] = value(outside / "target.txt", 2, doc["arrays"][0])
        path.write_text(json.dumps(doc, indent=2))
    else:
        raise AssertionError(field)


def _make_case(pristine: Path, case_dir: Path, case: Case) -> tuple[Path, Path]:
    command = COMMANDS[case.command]
    work, outside = case_dir / "work", case_dir / "outside"
    work.mkdir(parents=True)
    for name in command.folders:
        src = pristine / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, work / name)
    # outside: a twin of every pristine folder, a file with content, a folder of files
    outside.mkdir()
    for name in ("c", "ck", "m", "img", "p", "g"):
        shutil.copytree(pristine / name, outside / name)
    (outside / "target.txt").write_text("important: must not change\n" * 50)
    (outside / "dir").mkdir()
    (outside / "dir" / "a.txt").write_text("a file in a folder outside\n")
    (outside / "dir" / "b.bin").write_bytes(bytes(range(256)) * 8)
    (case_dir / "tmp").mkdir()
    names = _checkpoint_names(pristine / "ck")
    if case.folder == "field":
        _craft(work, outside, case.entry, case.kind, names)
    else:
        entry = _resolve(case.entry, names).rstrip("/")
        path = work / case.folder / entry
        twin_root = case.folder.split("/")[0]
        twin = outside / twin_root / Path(case.folder).relative_to(twin_root) / entry
        _replace_with(path, case.kind, twin, outside)
    return work, outside


# -- what a case may not change -----------------------------------------------------------


def _snapshot(top: Path) -> dict[str, tuple]:
    """Every entry below ``top`` (links not followed): type, size, time, content."""
    seen: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            rel = str(path.relative_to(top))
            if stat.S_ISLNK(st.st_mode):
                seen[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                seen[rel] = ("file", st.st_size, st.st_mtime_ns, st.st_mode, digest)
            else:
                seen[rel] = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_mtime_ns)
    return seen


def _hidden(top: Path) -> set[str]:
    """Hidden entries (a writer's temporaries) below ``top``, links not followed; a
    folder's lock file (``.lsdask.lock``) stays by design and is not one."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in dirnames + filenames:
            if name.startswith(".") and name != ".lsdask.lock":
                found.add(str((Path(dirpath) / name).relative_to(top)))
    return found


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    os.setsid()


def _run(argv: list, work: Path, tmp: Path) -> tuple[int | None, str]:
    """Run the case's command in ``work``; (status or None on a timeout, stderr)."""
    if str(argv[0]).startswith("python:"):
        full = [sys.executable, "-m", "tests.hostile_folders_child", argv[0][7:], str(argv[1])]
    else:
        full = [sys.executable, "-m", "lsdask", *map(str, argv)]
    env = lsdask_env(TMPDIR=str(tmp), PYTHONPATH=os.environ.get("PYTHONPATH", str(ROOT)))
    proc = subprocess.Popen(
        full, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=_limits,
    )  # fmt: skip
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        return None, err
    return proc.returncode, err


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_folder_changes_nothing_outside_and_fails_cleanly(
    pristine: Path, tmp_path: Path, case: Case
) -> None:
    work, outside = _make_case(pristine, tmp_path, case)
    before = _snapshot(outside)
    beside = sorted(p.name for p in tmp_path.iterdir())
    listed = {p.name for p in work.iterdir()}
    hidden = _hidden(work)
    argv = COMMANDS[case.command].argv(Path(""))
    status, err = _run(argv, work, tmp_path / "tmp")

    problems = []
    if status is None:
        problems.append(f"no end within {TIMEOUT} s (killed)")
    elif status != 0:
        errors = [line for line in err.splitlines() if line.startswith("lsdask: error:")]
        if status < 0:
            problems.append(f"killed by signal {-status}")
        if "Traceback" in err:
            problems.append("a Python traceback")
        if len(errors) != 1:
            problems.append(f"{len(errors)} 'lsdask: error:' lines")
    after = _snapshot(outside)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        problems.append(f"outside changed: {changed[:8]}")
    if sorted(p.name for p in tmp_path.iterdir()) != beside:
        problems.append(f"beside the folders: {sorted(p.name for p in tmp_path.iterdir())}")
    new = {p.name for p in work.iterdir()} - listed - set(COMMANDS[case.command].outputs)
    left = _hidden(work) - hidden
    if new or left:
        problems.append(f"left behind: {sorted(new | left)[:8]}")
    tail = "\n".join(err.strip().splitlines()[-6:])
    assert not problems, f"{case.id}: status {status}: {'; '.join(problems)}\n{tail}"


def test_an_outside_change_is_seen(tmp_path: Path) -> None:
    """The snapshot is not blind: a rewritten byte, a touched time and a new file show."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"abc")
    (tmp_path / "l").symlink_to("d/f")
    before = _snapshot(tmp_path)
    (tmp_path / "d" / "f").write_bytes(b"abd")
    assert _snapshot(tmp_path) != before
    before = _snapshot(tmp_path)
    os.utime(tmp_path / "d" / "f", ns=(1, 1))
    assert _snapshot(tmp_path) != before
    before = _snapshot(tmp_path)
    (tmp_path / "d" / "g").touch()
    assert _snapshot(tmp_path) != before


def test_the_pristine_folders_pass_every_command(pristine: Path, tmp_path: Path) -> None:
    """Without a hostile entry every command succeeds: the cases' refusals are the entries'."""
    for name, command in COMMANDS.items():
        work = tmp_path / name
        work.mkdir()
        for folder in command.folders:
            src = pristine / folder
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, work / folder)
        status, err = _run(command.argv(Path("")), work, tmp_path)
        assert status == 0, (name, err[-2000:])
