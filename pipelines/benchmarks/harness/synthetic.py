"""Synthetic corpora and patch stores from known models, made once and cached.

The generators are ``datasets/make_synthetic_corpus.py`` (LDA documents from
known topics, Parquet, one Dask task per file) and
``datasets/make_synthetic_patches.py`` (rows of a known zero-mean Gaussian
mixture, Zarr, one task per chunk); both run on a LocalCluster of
``n_workers`` and write into a temporary folder renamed at the end, so an
interrupted generation leaves nothing half-written. A folder's name holds
every setting, so a cached folder is reused only for the same data.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

from harness import REPO
from harness.run import log


def load_script(relpath: str, name: str) -> Any:
    """A script of ``datasets/`` as a module (the folder is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / relpath)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def ensure_corpus(
    folder: Path,
    *,
    n_docs: int,
    vocab_size: int,
    n_topics: int,
    mean_doc_length: float,
    docs_per_row_group: int,
    docs_per_file: int,
    seed: int,
    n_workers: int,
) -> tuple[Path, dict[str, Any]]:
    """The corpus under ``folder/<settings>`` (made if missing) and its description."""
    from lsdask.io.corpus import Corpus

    path = folder / (
        f"lda-{n_docs}d-V{vocab_size}-K{n_topics}-len{mean_doc_length:g}"
        f"-rg{docs_per_row_group}-s{seed}"
    )
    made_s = None
    if not (path / "manifest.json").exists():
        gen = load_script("datasets/make_synthetic_corpus.py", "bench_make_synthetic_corpus")
        log(f"making corpus {path.name} ({n_docs:,} documents)")
        t0 = time.perf_counter()
        gen.make_corpus(
            path,
            n_docs=n_docs,
            vocab_size=vocab_size,
            n_topics=n_topics,
            mean_doc_length=mean_doc_length,
            docs_per_row_group=docs_per_row_group,
            docs_per_file=max(docs_per_file, docs_per_row_group),
            seed=seed,
            client=None,
            n_workers=n_workers,
        )
        made_s = time.perf_counter() - t0
    corpus = Corpus.open(path)
    return path, {
        "path": str(path),
        "n_docs": corpus.n_docs,
        "n_tokens": corpus.n_tokens,
        "n_batches": len(corpus.batches),
        "bytes": folder_bytes(path / "parts"),
        "generate_s": made_s,
    }


def ensure_patches(
    folder: Path,
    *,
    n_patches: int,
    dim: int,
    n_components: int,
    chunk_rows: int,
    seed: int,
    n_workers: int,
) -> tuple[str, dict[str, Any]]:
    """The patch store under ``folder/<settings>`` (made if missing) and its description."""
    import zarr

    path = folder / f"patches-{n_patches}x{dim}-K{n_components}-c{chunk_rows}-s{seed}"
    gen = load_script("datasets/make_synthetic_patches.py", "bench_make_synthetic_patches")
    made_s = None
    if not (path / gen.ARRAY_NAME).exists():
        log(f"making patch store {path.name}")
        t0 = time.perf_counter()
        gen.make_patches(
            path,
            n_patches=n_patches,
            dim=dim,
            n_components=n_components,
            chunk_rows=chunk_rows,
            seed=seed,
            client=None,
            n_workers=n_workers,
        )
        made_s = time.perf_counter() - t0
    store = str(path / gen.ARRAY_NAME)
    array = zarr.open_array(store, mode="r")
    return store, {
        "path": store,
        "n_patches": int(array.shape[0]),
        "n_batches": -(-int(array.shape[0]) // int(array.chunks[0])),
        "bytes": folder_bytes(Path(store)),
        "generate_s": made_s,
    }
