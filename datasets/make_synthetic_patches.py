"""Make a large synthetic patch store from a known zero-mean Gaussian mixture, with Dask.

The data imitate mean-removed natural-image patches (lsparse paper, Sec. 4;
App. B.1 for the zero-mean Gaussian model): ``K`` components with weights
``pi ~ Dir(2)`` and covariances ``Sigma_k = Q_k diag(s_k) Q_k^T``, where
``Q_k`` is a random rotation and the spectrum decays like a power law,
``s_{k,i} = c_k (i + 1)^(-decay)`` (natural-image patches have roughly such
``1/f^2`` spectra), with a per-component scale ``c_k`` drawn log-uniformly.
Each patch is ``x_n ~ N(0, Sigma_{z_n})`` with ``z_n ~ Cat(pi)``.

Layout (the same as :func:`lsdask.io.patches.write_patch_store` makes)::

    out_path/
        train.zarr        # Zarr v3, float32 (n_patches, dim), chunks of chunk_rows rows
        true_params.npz   # weights (K,), covariances (K, dim, dim), spectra (K, dim)

One Dask task per chunk (``client.submit``), seeded from ``(seed, chunk index)``,
draws its rows and writes its own chunk, so the store does not depend on the
scheduling and memory stays at about one chunk per worker. The whole folder is
built under a hidden temporary sibling name and renamed at the end.

Example::

    python datasets/make_synthetic_patches.py --out data/synthetic/patches-10M
    python datasets/make_synthetic_patches.py --out data/tiny-patches --n-patches 100000 --sync
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    from lsdask.io.atomic import remove_tree, replace_dir
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lsdask.io.atomic import remove_tree, replace_dir

logger = logging.getLogger(__name__)

__all__ = ["ARRAY_NAME", "TRUE_PARAMS_NAME", "draw_mixture", "make_patches", "sample_patches"]

#: The Zarr array inside ``out_path``.
ARRAY_NAME = "train.zarr"
#: The true mixture beside it.
TRUE_PARAMS_NAME = "true_params.npz"
_PARAM_STREAM = 0
_CHUNK_STREAM = 1
_LOG_EVERY_S = 10.0


# --------------------------------------------------------------------------- the model


def draw_mixture(
    n_components: int, dim: int, seed: int, *, decay: float = 2.0, weight_concentration: float = 2.0
) -> dict[str, np.ndarray]:
    """The true zero-mean Gaussian mixture, drawn from a generator seeded by ``seed``.

    Parameters
    ----------
    n_components : int
        K.
    dim : int
        D (64 for 8x8 patches).
    seed : int
    decay : float, default 2.0
        Power of the spectrum, ``s_i ~ (i + 1)^(-decay)``.
    weight_concentration : float, default 2.0
        ``pi ~ Dir(weight_concentration)``.

    Returns
    -------
    dict
        ``weights`` (K,), ``covariances`` (K, D, D), ``spectra`` (K, D)
        (eigenvalues of each covariance, decreasing), ``cholesky`` (K, D, D)
        lower factors, all float64.
    """
    rng = np.random.default_rng([seed, _PARAM_STREAM])
    weights = rng.dirichlet(np.full(n_components, float(weight_concentration)))
    scales = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), size=n_components))
    spectra = scales[:, None] * (np.arange(1, dim + 1, dtype=np.float64)[None, :] ** -decay)
    covariances = np.empty((n_components, dim, dim))
    for k in range(n_components):
        q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
        q *= np.sign(np.diag(r))  # a uniformly random rotation (Haar)
        cov = (q * spectra[k]) @ q.T
        covariances[k] = (cov + cov.T) / 2
    cholesky = np.linalg.cholesky(covariances)
    return {
        "weights": weights,
        "covariances": covariances,
        "spectra": spectra,
        "cholesky": cholesky,
    }


def sample_patches(
    rng: np.random.Generator, weights: np.ndarray, cholesky: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` rows from the mixture, vectorized per component.

    Returns
    -------
    x : numpy.ndarray of float32, shape (n, D)
    z : numpy.ndarray of int64, shape (n,)
        The component of every row.
    """
    K, D, _ = cholesky.shape
    per_component = rng.multinomial(n, weights)
    z = np.repeat(np.arange(K), per_component)
    x = np.empty((n, D), dtype=np.float32)
    start = 0
    for k in np.flatnonzero(per_component):
        stop = start + int(per_component[k])
        x[start:stop] = rng.standard_normal((stop - start, D)) @ cholesky[k].T
        start = stop
    order = rng.permutation(n)
    return x[order], z[order]


def _write_chunk(path: str, chunk_index: int, start: int, stop: int, params: dict) -> int:
    """Task: draw rows ``start:stop`` (one chunk) and write them; seeded by the chunk index."""
    import zarr
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng([params["seed"], _CHUNK_STREAM, chunk_index])
    with threadpool_limits(1):  # many tiny products: BLAS threads only contend
        x, _ = sample_patches(rng, params["weights"], params["cholesky"], stop - start)
    array = zarr.open_array(path, mode="r+")
    array[start:stop] = x
    return stop - start


# --------------------------------------------------------------------------- running tasks


def _portable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` in a closure that Dask ships by value (cloudpickle), module and all.

    The workers then need not import this file, which is not part of a package
    (``datasets/`` is a folder of scripts). Plain pickle refuses a closure, so
    ``distributed`` falls back to cloudpickle, which copies ``fn`` by value once
    its module is registered for that.
    """
    import cloudpickle

    module = sys.modules.get(fn.__module__)
    if module is not None and fn.__module__ != "__main__":
        cloudpickle.register_pickle_by_value(module)

    def task(*args: Any) -> Any:
        return fn(*args)

    return task


def _run_tasks(
    fn: Callable[..., Any],
    arg_list: Sequence[tuple[Any, ...]],
    shared: Any,
    client: Any,
    n_workers: int,
) -> list[Any]:
    """``fn(*args, shared)`` for every args, one task each ("sync": in this process)."""
    if isinstance(client, str) and client == "sync":
        return [fn(*args, shared) for args in arg_list]
    from distributed import Client, LocalCluster, as_completed

    task = _portable(fn)
    owned: list[Any] = []
    if client is None:
        cluster = LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        client = Client(cluster)
        owned = [client, cluster]
    elif isinstance(client, str):
        client = Client(client)
        owned = [client]
    try:
        # a list of one: a dict scattered alone would become one key per entry
        (shared_future,) = client.scatter([shared], broadcast=True, hash=False)
        futures = [client.submit(task, *args, shared_future, pure=False) for args in arg_list]
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[Any] = [None] * len(futures)
        last_log = time.perf_counter()
        try:
            for n_done, future in enumerate(as_completed(futures), start=1):
                results[index[future.key]] = future.result()
                if time.perf_counter() - last_log > _LOG_EVERY_S:
                    logger.info("patch chunks: %d/%d done", n_done, len(futures))
                    last_log = time.perf_counter()
        except BaseException:
            client.cancel(futures)
            raise
        return results
    finally:
        for obj in owned:
            obj.close()


def _check_target(out: Path, overwrite: bool) -> None:
    if out.exists() and (not overwrite or not out.is_dir()):
        raise FileExistsError(
            f"out_path {str(out)!r} already exists; pass overwrite=True (--overwrite) to "
            "replace it once the new store is complete, or choose another path"
        )


def _check_positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


# --------------------------------------------------------------------------- the store


def make_patches(
    out_path: str | os.PathLike[str],
    *,
    n_patches: int = 10_000_000,
    dim: int = 64,
    n_components: int = 200,
    chunk_rows: int = 36_816,
    seed: int = 0,
    client: Any = None,
    n_workers: int = 2,
    decay: float = 2.0,
    overwrite: bool = False,
) -> str:
    """Write ``n_patches`` rows of a known zero-mean Gaussian mixture to a Zarr v3 array.

    Parameters
    ----------
    out_path : str or os.PathLike
        Folder to create, holding ``train.zarr`` and ``true_params.npz``.
    n_patches : int, default 10,000,000
        Rows N.
    dim : int, default 64
        Columns D.
    n_components : int, default 200
        K.
    chunk_rows : int, default 36,816
        Rows per Zarr chunk (one chunk = one batch of lsdask), per task.
    seed : int, default 0
        Seeds the mixture and, with the chunk index, every chunk: the same
        seed gives the same array whatever the client.
    client : None, "sync", a distributed.Client, or a scheduler address
        None starts a LocalCluster of ``n_workers`` processes for the call;
        "sync" generates in this process.
    n_workers : int, default 2
        Workers of the LocalCluster started when ``client`` is None.
    decay : float, default 2.0
        Power-law decay of each covariance's spectrum.
    overwrite : bool, default False
        Replace an existing ``out_path`` (only once the new store is complete).

    Returns
    -------
    str
        Path of the Zarr array (``out_path/train.zarr``), to pass to
        :meth:`lsdask.GaussianMixture.fit`.

    Raises
    ------
    FileExistsError
        If ``out_path`` exists and ``overwrite`` is false.
    ValueError
        For invalid parameters.

    Notes
    -----
    ``true_params.npz`` holds ``weights`` (K,), ``covariances`` (K, D, D) and
    ``spectra`` (K, D), float64. The array's attributes record the generator's
    parameters. Everything is written to a hidden temporary sibling folder that
    is renamed at the end; on any error it is removed and ``out_path`` is left
    as it was.
    """
    import zarr

    N = _check_positive("n_patches", n_patches)
    D = _check_positive("dim", dim)
    K = _check_positive("n_components", n_components)
    rows = _check_positive("chunk_rows", chunk_rows)
    if not (float(decay) >= 0 and np.isfinite(decay)):
        raise ValueError(f"decay must be a finite number >= 0; got {decay!r}")
    out = Path(os.path.abspath(os.fspath(out_path)))
    _check_target(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")

    t0 = time.perf_counter()
    mixture = draw_mixture(K, D, int(seed), decay=float(decay))
    params = {"seed": int(seed), "weights": mixture["weights"], "cholesky": mixture["cholesky"]}
    chunks = [(i, a, min(a + rows, N)) for i, a in enumerate(range(0, N, rows))]
    try:
        tmp.mkdir()
        np.savez(
            tmp / TRUE_PARAMS_NAME,
            weights=mixture["weights"],
            covariances=mixture["covariances"],
            spectra=mixture["spectra"],
        )
        array = zarr.create_array(
            store=str(tmp / ARRAY_NAME),
            shape=(N, D),
            chunks=(rows, D),
            dtype="float32",
            zarr_format=3,
            fill_value=0.0,
        )
        array.attrs.update(
            {
                "source": "synthetic zero-mean Gaussian mixture "
                "(datasets/make_synthetic_patches.py)",
                "n_components": K,
                "seed": int(seed),
                "decay": float(decay),
                "true_params": TRUE_PARAMS_NAME,
            }
        )
        store = str(tmp / ARRAY_NAME)
        written = _run_tasks(
            _write_chunk, [(store, i, a, b) for i, a, b in chunks], params, client, n_workers
        )
        if sum(written) != N:
            raise RuntimeError(f"patch store {tmp}: the tasks wrote {sum(written)} of {N} rows")
        _check_target(out, overwrite)
        replace_dir(tmp, out)
    except BaseException:
        remove_tree(tmp)
        raise
    logger.info(
        "wrote %d synthetic patches (D=%d, K=%d) in %d chunks to %s in %.1f s",
        N, D, K, len(chunks), out, time.perf_counter() - t0,
    )  # fmt: skip
    return str(out / ARRAY_NAME)


# --------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of this script."""
    p = argparse.ArgumentParser(
        description="Write patches from a known zero-mean Gaussian mixture to OUT/train.zarr "
        "(Zarr v3, float32) with the true parameters in OUT/true_params.npz; one Dask task "
        "per chunk."
    )
    p.add_argument("--out", type=Path, required=True, help="folder to create")
    p.add_argument("--n-patches", type=int, default=10_000_000, help="rows (default 10M)")
    p.add_argument("--dim", type=int, default=64, help="columns (default 64 = 8x8)")
    p.add_argument("--n-components", type=int, default=200, help="K (default 200)")
    p.add_argument("--chunk-rows", type=int, default=36_816, help="rows per chunk (batch)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    p.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://...)")
    p.add_argument("--sync", action="store_true", help="generate in this process (no Dask)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the script; return the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.sync and args.scheduler:
        parser.error("give --sync or --scheduler, not both")
    t0 = time.perf_counter()
    try:
        path = make_patches(
            args.out,
            n_patches=args.n_patches,
            dim=args.dim,
            n_components=args.n_components,
            chunk_rows=args.chunk_rows,
            seed=args.seed,
            client="sync" if args.sync else args.scheduler,
            n_workers=args.workers,
            overwrite=args.overwrite,
        )
    except (FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"path": path, "seconds": round(time.perf_counter() - t0, 1)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
