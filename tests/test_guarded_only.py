"""Nothing in lsdask opens a path below a handed folder except through
:mod:`lsdask.io.guarded`.

The test walks every module's syntax tree for the calls that open, read,
write, list, rename or delete files by path (``open``, ``os.replace``,
``Path.read_text``, ``np.load``, ``pq.read_table``, ``zarr.open_array``, ...).
Each such call outside ``guarded.py`` must be listed in :data:`ALLOWED` with
the reason it is safe: it reads a file object that ``guarded`` opened, it
makes the handed folder itself or its parent, it reads an input the user
named, or it writes outside any handed folder. A new direct call fails the
test until it goes through ``guarded`` or is listed here with its reason.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lsdask"

_MODULE_CALLS = {
    "os": {"open", "replace", "rename", "unlink", "remove", "rmdir", "mkdir", "makedirs",
           "listdir", "scandir", "walk", "truncate"},
    "shutil": {"rmtree", "move", "copy", "copy2", "copyfile", "copytree"},
    "np": {"load", "save", "savez", "savez_compressed", "fromfile"},
    "json": {"load"},
    "pq": {"ParquetFile", "read_table", "read_metadata", "read_schema", "write_table",
           "ParquetWriter"},
    "zarr": {"open", "open_array", "open_group", "create_array"},
}  # fmt: skip
_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "unlink", "mkdir", "rmdir",
            "iterdir", "glob", "rglob", "touch", "symlink_to", "rename", "open"}  # fmt: skip
#: receivers whose methods of those names are not file-system calls by path
_SAFE_RECEIVERS = {"guarded", "Corpus", "StoreCorpus"}

#: (module, call) -> (how many, why it is safe)
ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    ("io/faults.py", "open"): (1, "the test-only step log, a path the test names"),
    ("io/corpus/on_store.py", ".open"): (1, "an object in a store (local folders refused)"),
    ("io/corpus/on_store.py", "pq.ParquetFile"): (1, "reads a store object opened as above"),
    ("io/corpus/on_store.py", "pq.ParquetWriter"): (1, "writes into a buffer in memory"),
    ("io/stores/folders.py", "os.walk"): (
        1,
        "lists a folder lsdask wrote itself (a temporary, a working copy), refusing links",
    ),
    ("io/stores/folders.py", "open"): (1, "reads a file of such a folder, listed as above"),
    ("io/stores/folders.py", ".mkdir"): (2, "the fresh folder a version is rebuilt in"),
    ("persist/checkpoint_store.py", ".mkdir"): (2, "lsdask's working copy in its own cache"),
    ("persist/checkpoint_store.py", "os.scandir"): (
        2,
        "lists the working copy and a fresh rebuild of it (entries are not followed)",
    ),
    ("persist/checkpoint_store.py", "os.unlink"): (1, "a file of lsdask's working copy"),
    ("persist/checkpoint_store.py", "os.rename"): (1, "a rebuilt entry into the working copy"),
    ("persist/checkpoint_store.py", ".rmdir"): (1, "the emptied rebuild folder"),
    ("persist/checkpoint_store.py", ".read_text"): (1, "the working copy's version stamp"),
    ("persist/checkpoint_store.py", ".write_text"): (1, "the working copy's version stamp"),
    ("persist/checkpoint_store.py", "shutil.rmtree"): (2, "lsdask's own working copies"),
    ("persist/on_store.py", "shutil.rmtree"): (1, "the temporary folders a load rebuilt"),
    ("io/faults.py", ".write_text"): (1, "the test-only pause marker, a path the test names"),
    ("io/corpus/batch.py", "pq.ParquetFile"): (1, "reads a file object guarded opened"),
    ("io/corpus/read.py", "pq.ParquetFile"): (1, "reads a file object guarded opened"),
    ("io/corpus/read.py", "pq.read_metadata"): (2, "reads a file object guarded opened"),
    ("io/corpus/read.py", "pq.read_table"): (1, "reads a file object guarded opened"),
    ("io/corpus/transactions.py", "pq.read_metadata"): (1, "reads a file object guarded opened"),
    ("io/corpus/write.py", "pq.ParquetWriter"): (1, "writes a file object guarded opened"),
    ("io/corpus/write.py", ".iterdir"): (1, "is the output folder the user named empty?"),
    ("io/corpus/store.py", ".mkdir"): (1, "the parent of the output folder the user named"),
    ("io/locks.py", ".mkdir"): (1, "the locked folder itself"),
    ("io/ingest/inputs.py", "open"): (2, "an input file the user named"),
    ("io/ingest/inputs.py", ".open"): (1, "a gzip input file the user named"),
    ("io/ingest/table.py", "pq.ParquetFile"): (
        1,
        "an input file the user named, or one of a dataset folder guarded.check_tree listed",
    ),
    ("io/ingest/text_files.py", "os.walk"): (
        1,
        "lists an input folder without following links; files are read through guarded",
    ),
    ("io/patches.py", "os.open"): (
        1,
        "an image the user named or find_images listed, opened non-blocking, regular files only",
    ),
    ("io/patches.py", "os.scandir"): (1, "lists an image folder without following links"),
    ("io/patches.py", ".open"): (
        2,
        "an image from a file object opened as above; the sample photograph matplotlib ships",
    ),
    ("io/patches.py", ".mkdir"): (2, "the output's parent and its fresh temporary sibling"),
    ("io/patches.py", "zarr.open_array"): (1, "through a store whose every access is guarded"),
    ("io/patches.py", "zarr.create_array"): (1, "into a fresh temporary folder of its own"),
    ("io/tables/batch.py", "pq.ParquetFile"): (
        1,
        "reads a file object guarded (a local table) or fsspec (a URL) opened",
    ),
    ("io/tables/footer.py", "pq.ParquetFile"): (
        1,
        "reads a file object guarded (a local table) or fsspec (a URL) opened",
    ),
    ("io/tables/vocabulary.py", ".open"): (1, "a vocabulary file at a URL the user named"),
    ("jobs/corpus_lda.py", ".mkdir"): (1, "the parent of the output folder the user named"),
    ("jobs/corpus_lda.py", "np.load"): (1, "reads a file object guarded opened"),
    ("jobs/patch_gmm.py", ".mkdir"): (1, "the model folder the user named"),
    ("jobs/transform.py", ".mkdir"): (1, "the parent of the output file the user named"),
    ("jobs/transform.py", "pq.ParquetWriter"): (1, "writes a file object guarded opened"),
    ("kernels/cache.py", "os.makedirs"): (1, "numba's per-user cache, no handed folder"),
    ("kernels/cache.py", ".rglob"): (1, "lists numba's per-user cache, no handed folder"),
    ("persist/checked_npz.py", ".open"): (1, "a member of an archive guarded opened"),
    ("io/ingest/text_files.py", ".open"): (1, "a tar archive the user named"),
    ("io/source_text.py", ".open"): (1, "the tar archive of texts the user named (--texts)"),
    ("jobs/topics.py", "open"): (1, "the --out file the user named (a link or device)"),
    ("persist/esvi_store.py", "np.savez"): (1, "writes a file object guarded opened"),
    ("persist/memo_files.py", "np.savez"): (1, "writes a file object guarded opened"),
    ("persist/model_dir.py", ".mkdir"): (1, "the parent of the output folder the user named"),
    ("persist/model_dir.py", "np.savez"): (1, "writes a file object guarded opened"),
    ("persist/model_dir.py", "open"): (1, "a picture this process drew, outside the folder"),
    ("persist/svi_gibbs.py", "np.savez"): (1, "writes a file object guarded opened"),
    ("plotting.py", ".mkdir"): (1, "the folder of the picture the caller named"),
}


def _call_name(node: ast.Call) -> str | None:
    fn = node.func
    if isinstance(fn, ast.Name):
        return "open" if fn.id == "open" else None
    if not isinstance(fn, ast.Attribute):
        return None
    receiver = fn.value.id if isinstance(fn.value, ast.Name) else None
    if receiver in _MODULE_CALLS:
        return f"{receiver}.{fn.attr}" if fn.attr in _MODULE_CALLS[receiver] else None
    if fn.attr in _METHODS and receiver not in _SAFE_RECEIVERS:
        return f".{fn.attr}"
    return None


def _direct_calls() -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for file in sorted(PACKAGE.rglob("*.py")):
        module = file.relative_to(PACKAGE).as_posix()
        if module == "io/guarded.py":
            continue
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and (name := _call_name(node)) is not None:
                found[(module, name)] += 1
    return found


def test_only_guarded_opens_paths_below_handed_folders():
    found = _direct_calls()
    unexpected = {
        key: count for key, count in found.items() if count > ALLOWED.get(key, (0, ""))[0]
    }
    assert unexpected == {}, (
        "file-system calls by path outside lsdask/io/guarded.py: route them through "
        "lsdask.io.guarded, or list them in ALLOWED with the reason they are safe"
    )
    stale = {key for key, (count, _) in ALLOWED.items() if found.get(key, 0) < count}
    assert stale == set(), "ALLOWED lists calls that are gone: lower or drop their entries"


def test_the_walk_sees_a_direct_open(tmp_path):
    """The walk itself: each kind of call it must catch is caught."""
    source = (
        "import os, json, shutil\nimport numpy as np\nimport pyarrow.parquet as pq\n"
        "open(p)\nos.replace(a, b)\nshutil.rmtree(p)\nnp.load(p)\njson.load(f)\n"
        "pq.read_table(p)\npath.read_text()\nroot.glob('*')\nguarded.read_text(r, p)\n"
    )
    names = [
        _call_name(node)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and _call_name(node) is not None
    ]
    assert sorted(names) == sorted(
        ["open", "os.replace", "shutil.rmtree", "np.load", "json.load", "pq.read_table",
         ".read_text", ".glob"]
    )  # fmt: skip
