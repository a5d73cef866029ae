"""Hostile files, many cases in one process: ``python -m tests.hostile_child KIND
PRISTINE WORK N SEED``.

Each case copies the pristine saved model (or checkpoint) folder ``PRISTINE`` of
``KIND`` (lda, hdp, gmm, checkpoint, corpus) into ``WORK``, damages one file as a
hypothesis strategy draws it (an array cut, retyped, filled with NaN, infinity,
negative or huge values, a shape declared larger than the data, the archive
compressed; a JSON value
replaced by a wrong type, a negative or huge number, a path; a Parquet part cut
short or with a byte flipped), then loads it and,
where it loads, uses it. Before each case its id and damage are printed (and
flushed), so that a crash is attributed to its case; after it, ``ok`` (it loaded
and worked) or ``refused <error type>``. ``SEED`` seeds hypothesis (the same seed, the same
cases). A documented error (ValueError, its
subclasses such as lsdask.errors.DataError, FileNotFoundError) is a refusal; any
other exception prints ``UNEXPECTED`` and the process exits 1 after the last case.
The parent (tests/test_hostile_files.py) runs this under an address-space limit,
so that an allocation of the size a damaged header claims fails visibly.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import traceback
import zipfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

ARRAY_DAMAGE = (
    "cut", "complex", "string", "nan", "inf", "negative", "huge", "scalar", "header", "deflated",
)  # fmt: skip
JSON_VALUES = (-3, 10**18, 1e308, "x", [], {}, None, True, "/etc/passwd", "../../x", [[[[1]]]])


def _npz_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.npz") if p.is_file())


def _json_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.json") if p.is_file())


def _damage_array(arr: np.ndarray, how: str) -> np.ndarray:
    if how == "cut":
        return arr[: max(arr.shape[0] // 3, 1) - 1] if arr.ndim else arr
    if how == "complex":
        return arr.astype(np.complex128)
    if how == "string":
        return arr.astype(str)
    if how == "scalar":
        return np.array(2.5)
    out = np.array(arr, dtype=np.float64, copy=True)
    if out.size:
        flat = out.reshape(-1)
        flat[len(flat) // 2] = {"nan": np.nan, "inf": np.inf, "negative": -5.0, "huge": 1e300,
                                "header": 0.0}[how]  # fmt: skip
    return out


def _write_npz(
    file: Path, arrays: dict[str, np.ndarray], huge_header: str | None, deflated: bool = False
) -> None:
    # deflated: the same arrays, compressed (lsdask writes them stored: what it reads
    # back may hold no more than it occupies in the file)
    (np.savez_compressed if deflated else np.savez)(file, **arrays)
    if huge_header is None:
        return
    # rewrite one member's header to claim a (10, 10**9) float64 array
    with zipfile.ZipFile(file) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": "<f8", "fortran_order": False, "shape": (10, 10**9)}
    )
    members[huge_header + ".npy"] = head.getvalue() + b"\0" * 64
    with zipfile.ZipFile(file, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _damage(root: Path, data: st.DataObject) -> str:
    npz, js = _npz_files(root), _json_files(root)
    parquet = sorted(root.rglob("*.parquet"))
    if parquet and data.draw(st.integers(0, 2)) == 0:
        file = data.draw(st.sampled_from(parquet))
        raw = bytearray(file.read_bytes())
        at = data.draw(st.integers(0, len(raw) - 1))
        if data.draw(st.booleans()):
            file.write_bytes(bytes(raw[:at]))  # cut short
            return f"{file.name}: cut at byte {at}"
        raw[at] ^= 0xFF
        file.write_bytes(bytes(raw))
        return f"{file.name}: byte {at} flipped"
    if js and (not npz or data.draw(st.booleans())):
        file = data.draw(st.sampled_from(js))
        doc = json.loads(file.read_text())
        path, node = [], doc
        while isinstance(node, dict) and node:
            key = data.draw(st.sampled_from(sorted(node)))
            path.append(key)
            if not isinstance(node[key], dict) or data.draw(st.booleans()):
                break
            node = node[key]
        value = data.draw(st.sampled_from(JSON_VALUES))
        if path:
            node[path[-1]] = value
        file.write_text(json.dumps(doc))
        return f"{file.name}: {'.'.join(map(str, path))} = {value!r}"
    file = data.draw(st.sampled_from(npz))
    with np.load(file, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    name = data.draw(st.sampled_from(sorted(arrays)))
    how = data.draw(st.sampled_from(ARRAY_DAMAGE))
    if how not in ("header", "deflated"):
        arrays[name] = _damage_array(arrays[name], how)
    _write_npz(file, arrays, name if how == "header" else None, how == "deflated")
    return f"{file.relative_to(root)}: {name} {how}"


def _use(kind: str, folder: Path, pristine: Path) -> None:
    """Load the folder and use what loaded."""
    from lsdask.persist import load_model
    from lsdask.persist.checkpoint import CheckpointDir
    from lsdask.persist.memo_files import load_stats

    if kind == "corpus":
        from lsdask.io.corpus import Corpus

        corpus = Corpus.open(folder)
        for batch in corpus.batches:
            batch.load()
        return
    if kind == "checkpoint":
        saved = CheckpointDir(folder).read()
        # the model's shapes, kept beside the pristine folder (not damaged)
        limits = json.loads((pristine.parent / f"{pristine.name}-limits.json").read_text())
        for name in saved["memo"].values():
            load_stats(folder / "memo" / name, {k: tuple(v) for k, v in limits.items()})
        return
    model = load_model(folder)
    V = model.n_features_in_
    rows = np.random.default_rng(0).poisson(1.0, size=(4, V)).astype(np.float64)
    if kind == "gmm":
        model.predict_proba(np.random.default_rng(0).normal(size=(5, V)))
    else:
        import scipy.sparse as sp

        model.transform(sp.csr_matrix(rows))


def main(argv: list[str]) -> int:
    kind, pristine, work, n, run = argv[0], Path(argv[1]), Path(argv[2]), int(argv[3]), int(argv[4])

    unexpected = []
    counter = iter(range(10**9))

    @seed(run)
    @settings(max_examples=n, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.data())
    def case(data: st.DataObject) -> None:
        i = next(counter)
        folder = work / f"case{i}"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(pristine, folder)
        what = _damage(folder, data)
        print(f"case {run}-{i}: {what}", flush=True)
        try:
            _use(kind, folder, pristine)
            print("  ok", flush=True)
        except (ValueError, FileNotFoundError) as exc:
            print(f"  refused {type(exc).__name__}: {str(exc)[:160]}", flush=True)
        except Exception as exc:
            print(f"  UNEXPECTED {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc()
            unexpected.append(i)
        shutil.rmtree(folder, ignore_errors=True)

    case()
    print(f"done: {next(counter)} cases, {len(unexpected)} unexpected", flush=True)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
