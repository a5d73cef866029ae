"""Checkpoint and model folders lsdask did not write (issue 39, the persist part):
nothing outside the folder is touched, nothing inside it is trusted.

One test per finding: a link in a checkpoint folder (3), special files in the
place of its small files (5), small files that claim huge arrays (6), crafted
checkpoint fields and a full disk (12), a Gaussian mixture whose scale matrix
is not positive definite, and files renamed into place without being forced
to disk. Where a finding is about memory or a hang, the loads run in a child
process under an address-space limit, with a timeout.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import lsdask
from lsdask.errors import DataError
from lsdask.persist import load_model, save_model
from lsdask.persist.checked_npz import read_npz
from lsdask.synthetic import make_bars_corpus

ROOT = Path(__file__).resolve().parents[1]
#: the child's address space (as tests/test_hostile_files.py): room for Python,
#: numba and a small model
ADDRESS_SPACE = 6 << 30
KW = dict(sparsity=3, client="sync", random_state=0, batch_size=100)


@pytest.fixture(scope="module")
def corpus():
    X, _ = make_bars_corpus(300, doc_topic_prior=0.1, random_state=0)
    return X


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, corpus):
    """An LDA checkpoint folder, a saved LDA model and a saved full-covariance
    Gaussian mixture, small."""
    root = tmp_path_factory.mktemp("untrusted")
    lsdask.LDA(6, n_laps=2, checkpoint_dir=str(root / "checkpoint"), **KW).fit(corpus)
    save_model(lsdask.LDA(6, n_laps=2, **KW).fit(corpus), root / "lda")
    Y = np.random.default_rng(0).normal(size=(300, 3))
    gmm = lsdask.GaussianMixture(
        4, covariance_type="full", sparsity=2, n_laps=2, client="sync", random_state=0
    )
    save_model(gmm.fit(Y), root / "gmm")
    return root


def _digest(folder: Path) -> dict[str, str]:
    """Every entry below ``folder`` (the folder lock aside): a file's SHA-256, a
    link's target, or that it is a folder."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.name == ".lsdask.lock":
            continue
        if path.is_symlink():
            out[rel] = "link " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "folder"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _latest(folder: Path) -> Path:
    return folder / (folder / "LATEST").read_text().strip()


def _temporaries(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.name.endswith(".tmp") or ".tmp-" in p.name
    )


# -- finding 3: a link in a checkpoint folder ----------------------------------------------


@pytest.mark.parametrize("entry", ["memo", "ckpt", "memo-file"])
def test_a_link_in_a_checkpoint_folder_changes_nothing_it_points_to(
    pristine, corpus, tmp_path, entry
):
    """The folder's ``memo/``, its checkpoint or one memo file links into another
    run's checkpoint folder: the fit refuses the link, naming the folder and the
    entry, and the other folder is unchanged and still resumes."""
    other = tmp_path / "other"
    shutil.copytree(pristine / "checkpoint", other)
    before = _digest(other)
    folder = tmp_path / "folder"
    if entry == "memo":
        folder.mkdir()
        (folder / "memo").symlink_to(other / "memo")
        resume, where = False, r"'memo' passes through 'memo', a symbolic link"
    else:
        shutil.copytree(other, folder)
        if entry == "ckpt":
            name = _latest(other).name
            shutil.rmtree(folder / name)
            (folder / name).symlink_to(other / name)
            where = rf"'{name}/state.json' passes through '{name}', a symbolic link"
        else:
            name = sorted(p.name for p in (folder / "memo").iterdir())[0]
            (folder / "memo" / name).unlink()
            (folder / "memo" / name).symlink_to(other / "memo" / name)
            where = rf"'memo/{name}' is a symbolic link"
        resume = True
    model = lsdask.LDA(6, n_laps=1, checkpoint_dir=str(folder), resume=resume, **KW)
    with pytest.raises(DataError, match=rf"^{re.escape(str(folder))}: {where}\. lsdask never"):
        model.fit(corpus)
    assert _digest(other) == before
    resumed = lsdask.LDA(6, n_laps=1, checkpoint_dir=str(other), resume=True, **KW).fit(corpus)
    assert resumed.n_laps_ == 3


# -- finding 5: special files in the place of a checkpoint's or a model's files ------------

_SPECIAL_CHILD = """
import json, resource, signal, sys, time
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from lsdask.persist import load_model
from lsdask.persist.checkpoint import CheckpointDir

def hung(signum, frame):
    raise TimeoutError("no answer within 20 s")

signal.signal(signal.SIGALRM, hung)
for line in sys.argv[1:]:
    kind, folder = line.split("=", 1)
    start = time.monotonic()
    signal.alarm(20)
    try:
        CheckpointDir(folder).read() if kind == "checkpoint" else load_model(folder)
        print("loaded", flush=True)
    except (ValueError, FileNotFoundError) as exc:
        took = time.monotonic() - start
        print(f"refused in {{took:.1f}} s: {{exc}}".replace("\\n", " "), flush=True)
    except BaseException as exc:
        print(f"UNEXPECTED {{type(exc).__name__}}: {{exc}}", flush=True)
    finally:
        signal.alarm(0)
"""

#: (folder kind, the file replaced, what takes its place, the refusal expected)
_SPECIAL = [
    ("checkpoint", "LATEST", "fifo", r"'LATEST' is a FIFO"),
    ("checkpoint", "LATEST", "/dev/zero", r"'LATEST' is a symbolic link"),
    ("checkpoint", "LATEST", "big", r"'LATEST' holds 100,000 bytes, more than the 4,096"),
    ("checkpoint", "state.json", "/dev/urandom", r"state\.json' is a symbolic link"),
    ("checkpoint", "state.json", "fifo", r"state\.json' is a FIFO"),
    ("lda", "params.json", "fifo", r"'params\.json' is a FIFO"),
    ("lda", "params.json", "/dev/zero", r"'params\.json' is a symbolic link"),
    ("lda", "vocab.txt", "fifo", r"'vocab\.txt' is a FIFO"),
    ("lda", "arrays.npz", "/dev/urandom", r"'arrays\.npz' is a symbolic link"),
]


def test_special_files_in_a_folder_are_refused_at_once(pristine, tmp_path):
    """FIFOs, links to /dev/zero or /dev/urandom and oversized files in the
    place of LATEST, state.json, params.json, vocab.txt and arrays.npz: each
    refused at once, naming the folder and the file, never read or waited on."""
    cases = []
    for i, (kind, name, what, _) in enumerate(_SPECIAL):
        folder = tmp_path / f"case{i}"
        shutil.copytree(pristine / kind, folder)
        if kind == "lda" and name == "vocab.txt":  # a model with a vocabulary
            meta = json.loads((folder / "params.json").read_text())
            meta["fitted"]["has_vocabulary"] = True
            (folder / "params.json").write_text(json.dumps(meta))
        target = folder / name if kind == "lda" or name == "LATEST" else _latest(folder) / name
        target.unlink(missing_ok=True)
        if what == "fifo":
            os.mkfifo(target)
        elif what == "big":
            target.write_text("ckpt-00002-000000-abcdef" + " " * (100_000 - 24))
        else:
            target.symlink_to(what)
        cases.append(f"{kind}={folder}")
    run = subprocess.run(
        [sys.executable, "-c", _SPECIAL_CHILD.format(limit=ADDRESS_SPACE), *cases],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = run.stdout.splitlines()
    assert len(lines) == len(_SPECIAL), run.stdout + run.stderr[-3000:]
    for i, ((kind, name, what, match), line) in enumerate(zip(_SPECIAL, lines, strict=True)):
        assert line.startswith("refused in "), (kind, name, what, line)
        assert float(line.split()[2]) < 5.0, line
        assert f"{tmp_path / f'case{i}'}" in line, line
        assert re.search(match, line), (match, line)


# -- finding 6: small files that claim huge arrays ------------------------------------------


def _deflated_member(archive: Path, name: str, shape: tuple[int, ...]) -> None:
    """Put into ``archive`` (replacing ``name``) a deflated member whose header
    claims ``shape`` float64 zeros, all present: a few hundred KB on disk."""
    with zipfile.ZipFile(archive) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    members.pop(f"{name}.npy", None)
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    zeros = bytes(1 << 23)
    total = int(np.prod(shape)) * 8
    with zipfile.ZipFile(archive, "w") as z:
        for member, data in members.items():
            z.writestr(member, data)
        info = zipfile.ZipInfo(f"{name}.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            f.write(head.getvalue())
            for start in range(0, total, len(zeros)):
                f.write(zeros[: min(len(zeros), total - start)])
    assert archive.stat().st_size < 2 << 20


_MEMORY_CHILD = """
import json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from lsdask.persist import load_model
from lsdask.persist.memo_files import load_stats

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

for line in sys.argv[1:]:
    kind, path, limits = line.split("=", 2)
    before = peak()
    try:
        if kind == "model":
            load_model(path)
        else:
            load_stats(Path(path), {{k: tuple(v) for k, v in json.loads(limits).items()}})
        outcome = "loaded"
    except ValueError as exc:
        outcome = "refused: " + str(exc).replace("\\n", " ")
    except BaseException as exc:
        outcome = f"UNEXPECTED {{type(exc).__name__}}: {{exc}}"
    print(f"{{peak() - before}} {{outcome}}", flush=True)
"""


def test_small_files_claiming_huge_arrays_are_refused_before_allocating(pristine, corpus, tmp_path):
    """A model's arrays.npz and a memo file, each under 2 MB, holding a member
    that inflates to 192 MB of zeros (24 million entries; the model holds
    6 x 25): refused with one line before anything of that size is allocated."""
    model = tmp_path / "lda"
    shutil.copytree(pristine / "lda", model)
    _deflated_member(model / "arrays.npz", "components_", (6, 4_000_000))
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(pristine / "checkpoint", checkpoint)
    memo = sorted((checkpoint / "memo").iterdir())[0]
    with np.load(memo) as z:
        assert "N" in z.files
    _deflated_member(memo, "N", (24_000_000,))
    empty = lsdask.LDA(6, n_laps=1, **KW).fit(corpus).model_.empty_stats()
    limits = json.dumps({k: list(v.shape) for k, v in empty.items()})
    run = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD.format(limit=ADDRESS_SPACE),
         f"model={model}=", f"memo={memo}={limits}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = run.stdout.splitlines()
    assert len(lines) == 2, run.stdout + run.stderr[-3000:]
    named = (f"model '{model}': arrays.npz: array 'components_'", f"memo file {memo}")
    for line, where in zip(lines, named, strict=True):
        grown, outcome = line.split(" ", 1)
        assert outcome.startswith("refused: "), line
        assert where in outcome and "is compressed" in outcome, line
        assert int(grown) < 64 << 20, f"the peak grew by {int(grown):,} bytes: {line}"


def _npz(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def test_read_npz_checks_every_header_against_the_callers_shapes(tmp_path):
    """The bounds a caller states (a largest shape, a number of entries, the bytes
    of all arrays) refuse a member before its data is read."""
    file = _npz(tmp_path / "a.npz", a=np.zeros((2, 4)), b=np.zeros(10))
    with pytest.raises(ValueError, match=r"a\.npz: a has shape \(2, 4\), expected \(2, 3\) at"):
        read_npz(file, str(file), shapes={"a": (2, 3)})
    with pytest.raises(ValueError, match=r"b has shape \(10,\), expected at most 9 entries"):
        read_npz(file, str(file), shapes={"b": 9})
    with pytest.raises(ValueError, match=r"claim [\d,]+ bytes in all, more than the 100 "):
        read_npz(file, str(file), max_bytes=100)
    arrays = read_npz(file, str(file), shapes={"a": (2, 4), "b": 10})
    assert arrays["a"].shape == (2, 4) and arrays["b"].shape == (10,)
    # a member named twice (each would be allocated) is refused
    with zipfile.ZipFile(file) as z:
        member = z.read("a.npy")
    with zipfile.ZipFile(file, "a") as z, pytest.warns(UserWarning, match="Duplicate name"):
        z.writestr("a.npy", member)
    with pytest.raises(ValueError, match=r"holds the array 'a' twice"):
        read_npz(file, str(file))


# -- finding 12: crafted checkpoint fields, a full disk ------------------------------------


@pytest.mark.parametrize(
    ("keys", "value"),
    [(("state", "state"), -5), (("state", "state"), 2**200), (("state", "inc"), "x"),
     (("state",), [1, 2, 3]), (("has_uint32",), 2**70), ((), "x")],
)  # fmt: skip
def test_a_crafted_rng_state_is_refused_naming_the_file_and_field(
    pristine, corpus, tmp_path, keys, value
):
    """rng_state (or a number in it) of the wrong type, out of range, or a list of
    the wrong length: one DataError naming the checkpoint's state.json and the
    field, before the fit starts; the folder is unchanged."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(pristine / "checkpoint", folder)
    state = _latest(folder) / "state.json"
    doc = json.loads(state.read_text())
    node, *path = ["state", "rng_state", *keys]
    parent = doc
    for key in [node, *path][:-1]:
        parent = parent[key]
    parent[([node, *path])[-1]] = value
    state.write_text(json.dumps(doc))
    before = _digest(folder)
    model = lsdask.LDA(6, n_laps=1, checkpoint_dir=str(folder), resume=True, **KW)
    where = re.escape(f"checkpoint {_latest(folder)}: state.json: rng_state ")
    with pytest.raises(DataError, match=rf"^{where}"):
        model.fit(corpus)
    assert _digest(folder) == before


def test_a_checkpoint_config_of_the_wrong_type_is_refused(pristine, corpus, tmp_path):
    folder = tmp_path / "checkpoint"
    shutil.copytree(pristine / "checkpoint", folder)
    state = _latest(folder) / "state.json"
    for edit, match in [
        (lambda d: d["config"].update(params=[]), r"config lacks params\.estimator"),
        (lambda d: d["config"]["model"].update(kind=5), r"config\.model does not make a model"),
        (lambda d: d.update(has_init="yes"), r"has_init is 'yes'; expected true or false"),
    ]:
        doc = json.loads(state.read_text())
        edit(doc)
        state.write_text(json.dumps(doc))
        model = lsdask.LDA(6, n_laps=1, checkpoint_dir=str(folder), resume=True, **KW)
        where = re.escape(f"checkpoint {_latest(folder)}: state.json: ")
        with pytest.raises(DataError, match=rf"^{where}{match}"):
            model.fit(corpus)
        shutil.rmtree(folder)
        shutil.copytree(pristine / "checkpoint", folder)


def test_a_checkpoint_carrying_more_sticks_than_its_model_is_refused(corpus, tmp_path):
    """An HDP checkpoint's carried sticks size the resumed model: a crafted list of
    a million sticks would make it allocate a million topics."""
    folder = tmp_path / "checkpoint"
    kw = {**KW, "n_laps": 1, "checkpoint_dir": str(folder)}
    lsdask.HDP(8, **kw).fit(corpus)
    state = _latest(folder) / "state.json"
    doc = json.loads(state.read_text())
    assert len(doc["state"]["carried"]["rho"]) <= 8
    doc["state"]["carried"]["rho"] = [0.5] * 10**6
    state.write_text(json.dumps(doc))
    where = re.escape(f"checkpoint {_latest(folder)}: state.json: carried.rho and carried.omega")
    with pytest.raises(DataError, match=rf"^{where} hold 1000000 and \d+ sticks; expected as"):
        lsdask.HDP(8, resume=True, **kw).fit(corpus)


@pytest.fixture
def full_disk(monkeypatch):
    """Make ``os.fsync`` of a file whose path matches a pattern fail as on a full disk."""
    real = os.fsync

    def arm(pattern: str) -> None:
        import re

        def fsync(fd: int) -> None:
            if re.search(pattern, os.readlink(f"/proc/self/fd/{fd}")):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    return arm


@pytest.mark.parametrize(
    ("pattern", "named"),
    [(r"/memo/\.b\d+-.*\.tmp$", r"memo/b\d{6}-\w+-\d{8}\.npz"),
     (r"/\.state\.json\..*\.tmp$", r"ckpt-\d{5}-\d{6}-[0-9a-f]{6}/state\.json"),
     (r"/\.LATEST\..*\.tmp$", r"LATEST")],
)  # fmt: skip
def test_a_full_disk_names_the_file_and_leaves_no_temporary(
    corpus, tmp_path, full_disk, pattern, named
):
    folder = tmp_path / "checkpoint"
    beside = tmp_path / "beside.txt"
    beside.write_text("untouched")
    full_disk(pattern)
    model = lsdask.LDA(6, n_laps=1, checkpoint_dir=str(folder), **KW)
    with pytest.raises(OSError, match=r"No space left on device") as caught:
        model.fit(corpus)
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename is not None, caught.value
    assert re.fullmatch(rf"{re.escape(str(folder))}/(\.tmp-)?{named}", caught.value.filename), (
        caught.value.filename
    )
    assert str(caught.value.filename) in str(caught.value)
    assert _temporaries(folder) == []
    assert beside.read_text() == "untouched"


def test_a_full_disk_while_saving_a_model_names_the_file_and_leaves_nothing(
    pristine, tmp_path, full_disk
):
    model = load_model(pristine / "lda")
    full_disk(r"/arrays\.npz$")
    out = tmp_path / "saved"
    with pytest.raises(OSError, match=r"No space left on device") as caught:
        save_model(model, out)
    assert caught.value.filename == str(out / "arrays.npz")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


# -- smaller: a GMM whose scale matrix is not positive definite; fsync before rename -------


@pytest.mark.parametrize("how", ["negated", "asymmetric"])
def test_a_gmm_whose_scale_matrix_is_not_positive_definite_is_refused(pristine, tmp_path, how):
    folder = tmp_path / "gmm"
    shutil.copytree(pristine / "gmm", folder)
    with np.load(folder / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    B = arrays["obs_B"].copy()
    if how == "negated":
        B[1] = -B[1]
        match = r"obs_B\[1\] is not positive definite"
    else:
        B[1, 0, 1] += 1.0
        match = r"obs_B\[1\] is not symmetric"
    arrays["obs_B"] = B
    np.savez(folder / "arrays.npz", **arrays)
    with pytest.raises(
        ValueError, match=rf"^model '{re.escape(str(folder))}': arrays\.npz: {match}"
    ):
        load_model(folder)


def test_every_file_and_folder_is_forced_to_disk_before_it_counts(
    pristine, corpus, tmp_path, monkeypatch
):
    """A saved model's files and folder, and a checkpoint's files and folders, are
    fsynced before they are renamed into place (or LATEST names them)."""
    real = os.fsync
    synced: list[str] = []

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    out = tmp_path / "saved"
    save_model(load_model(pristine / "lda"), out)
    names = {Path(p).name for p in synced}
    assert {"arrays.npz", "params.json"} <= names, synced
    assert any(Path(p).name.startswith(".saved.") and Path(p).parent == tmp_path.resolve()
               for p in synced), synced  # fmt: skip
    synced.clear()
    folder = tmp_path / "checkpoint"
    lsdask.LDA(6, n_laps=1, checkpoint_dir=str(folder), **KW).fit(corpus)
    assert str(folder.resolve()) in synced and str(folder.resolve() / "memo") in synced, synced
    latest = _latest(folder)
    assert any(Path(p).name == f".tmp-{latest.name}" for p in synced), synced
