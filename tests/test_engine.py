"""The Dask engine on a real 2-process LocalCluster equals the in-process run."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr

import lsdask
from lsdask.engine import DaskExecutor


def _patches(rng, n=3000, d=6, k=4):
    covs = [np.diag(rng.uniform(0.1, 3.0, d)) for _ in range(k)]
    z = rng.integers(k, size=n)
    return np.stack([rng.multivariate_normal(np.zeros(d), covs[j]) for j in z]).astype(np.float32)


@pytest.fixture
def zarr_patches(tmp_path, rng):
    X = _patches(rng)
    z = zarr.create_array(str(tmp_path / "p.zarr"), shape=X.shape, chunks=(500, 6), dtype="f4")
    z[:] = X
    return str(tmp_path / "p.zarr"), X


def _fit(X, client, **kw):
    params = dict(
        covariance_type="zero-mean", sparsity=2, n_laps=3, random_state=7, batches_per_update=2
    )
    params.update(kw)
    return lsdask.GaussianMixture(5, client=client, **params).fit(X)


@pytest.mark.parametrize("algorithm", ["memo", "svi", "vb"])
def test_local_cluster_equals_in_process_on_zarr(dask_client, zarr_patches, algorithm):
    path, _ = zarr_patches
    a = _fit(path, "sync", algorithm=algorithm)
    b = _fit(path, dask_client, algorithm=algorithm)
    np.testing.assert_allclose(b.elbo_trace_, a.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(b.weights_, a.weights_, rtol=1e-10)
    np.testing.assert_allclose(b.covariances_, a.covariances_, rtol=1e-9, atol=1e-12)


def test_local_cluster_equals_in_process_on_numpy_and_dask_arrays(dask_client, zarr_patches):
    _, X = zarr_patches
    a = _fit(X, "sync", batch_size=500)
    b = _fit(X, dask_client, batch_size=500)
    c = _fit(da.from_array(X, chunks=(500, 6)), dask_client)
    np.testing.assert_allclose(b.elbo_trace_, a.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(c.elbo_trace_, a.elbo_trace_, rtol=1e-10)


def test_globals_are_one_future_per_update_not_embedded_in_tasks(dask_client, zarr_patches):
    path, _ = zarr_patches
    executor = DaskExecutor(dask_client)
    source = lsdask.io.sources.as_batch_source(path)
    handle = executor.broadcast(np.ones(10))
    assert type(handle).__name__ == "Future"
    got = executor.map(lambda batch, shared: float(shared.sum()) + batch.load().shape[0],
                       executor.register(source.batches), handle)  # fmt: skip
    assert got == [510.0] * 6
    executor.close()  # does not close a client it did not create
    assert dask_client.status == "running"


def test_default_starts_and_closes_its_own_local_cluster(zarr_patches):
    path, _ = zarr_patches
    model = lsdask.GaussianMixture(3, sparsity=2, n_laps=2, n_workers=2, random_state=0).fit(path)
    assert model.n_laps_ == 2 and np.isfinite(model.elbo_trace_).all()
