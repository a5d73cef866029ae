from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FAULTS = Path(__file__).resolve().parent / "faults"


def pytest_collection_modifyitems(config, items) -> None:
    """Mark what the fast subset (``pytest -m "not slow and not cluster"``) leaves
    out: ``cluster`` for the tests on the shared LocalCluster (``dask_client``),
    ``faults`` (and ``slow``) for the fault-injection suite; the other slow tests
    carry ``@pytest.mark.slow`` themselves."""
    for item in items:
        if "dask_client" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)
        if FAULTS in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def dask_client():
    """A real 2-process LocalCluster, shared by the engine tests."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()
