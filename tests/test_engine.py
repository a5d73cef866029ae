"""The Dask engine on a real 2-process LocalCluster equals the in-process run."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr

import lsdask
from lsdask.engine import DaskExecutor
from lsdask.errors import ClusterError


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
    K = params.pop("n_components", 5)
    return lsdask.GaussianMixture(K, client=client, **params).fit(X)


def test_a_relative_zarr_path_reads_from_a_worker_started_elsewhere(
    zarr_patches, tmp_path, monkeypatch
):
    """Workers of an external cluster start in their own folder: a relative path
    (or an array opened by one) failed there with 'does not exist'."""
    from lsdask.io.sources import zarr_source

    monkeypatch.chdir(tmp_path)
    by_path = zarr_source("p.zarr")
    by_array = zarr_source(zarr.open_array("p.zarr", mode="r"))
    monkeypatch.chdir("/")  # where a worker process may run
    for source in (by_path, by_array):
        np.testing.assert_array_equal(source.batches[1].load(), zarr_patches[1][500:1000])
    # a worker that cannot see the store says where it ran (it said "does not exist")
    (tmp_path / "p.zarr").rename(tmp_path / "moved.zarr")
    with pytest.raises(lsdask.errors.DataError, match=r"chunk 0 \(rows 0:500\): .*p\.zarr "
                       r"does not exist on host .* the Dask workers do not"):  # fmt: skip
        by_path.batches[0].load()


@pytest.mark.parametrize("algorithm", ["memo", "svi", "vb"])
def test_local_cluster_equals_in_process_on_zarr(dask_client, zarr_patches, algorithm):
    path, _ = zarr_patches
    a = _fit(path, "sync", algorithm=algorithm)
    b = _fit(path, dask_client, algorithm=algorithm)
    np.testing.assert_allclose(b.elbo_trace_, a.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(b.weights_, a.weights_, rtol=1e-10)
    np.testing.assert_allclose(b.covariances_, a.covariances_, rtol=1e-9, atol=1e-12)


def test_local_cluster_equals_in_process_with_float32_preselection(dask_client, zarr_patches):
    """K=40, L=2: the cost model turns on the float32 preselection (40 >= 8 (2 + 3)),
    which runs inside the workers as it does in process."""
    path, _ = zarr_patches
    a = _fit(path, "sync", n_components=40)
    b = _fit(path, dask_client, n_components=40)
    assert a.model_._preselects(2)
    np.testing.assert_allclose(b.elbo_trace_, a.elbo_trace_, rtol=1e-10)
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


def test_scheduler_task_count_stays_flat_over_ten_laps(dask_client, zarr_patches):
    from lsdask.io.sources import as_batch_source
    from lsdask.learn import MemoizedVI, initial_stats
    from lsdask.models import MixtureModel, ZeroMeanGaussian

    path, X = zarr_patches
    source = as_batch_source(path)
    model = MixtureModel(ZeroMeanGaussian().with_data_defaults(X), 4, 1.0)
    rng = np.random.default_rng(0)
    glob = model.global_step(initial_stats(model, X, "random", rng))
    counts = []

    def count_tasks(result):
        counts.append(
            dask_client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        )

    P = 2
    MemoizedVI(n_laps=10, tol=1e-15, batches_per_update=P).run(
        model, DaskExecutor(dask_client), source.batches, glob, rng, 2, callback=count_tasks
    )
    assert len(counts) == 10
    # Between laps the driver holds one future: the current globals. Releases
    # reach the scheduler asynchronously, so the previous globals and the last
    # wave's P results may not be forgotten yet: at most P + 2 tasks, whatever
    # the lap. A lineage kept alive would add all B = 6 batches every lap.
    assert len(source.batches) == 6
    assert max(counts) <= P + 2, counts


def test_tree_sum_on_workers_equals_in_process(dask_client, zarr_patches):
    from lsdask.engine import SerialExecutor

    path, _ = zarr_patches
    source = lsdask.io.sources.as_batch_source(path)

    def rows_and_sum(batch, shared):
        x = batch.load().astype(np.float64)
        return np.array([x.shape[0], x.sum()]) * shared

    serial = SerialExecutor().map_sum(rows_and_sum, source.batches, 2.0)
    executor = DaskExecutor(dask_client)
    remote = executor.map_sum(rows_and_sum, source.batches, executor.broadcast(2.0))
    np.testing.assert_array_equal(remote, serial)
    assert remote[0] == 2 * 3000


def _kill_a_worker_when(client, pids, killed, when):
    """A thread that kills, once ``when(busy tasks)`` holds, the worker of
    ``pids`` (address -> pid) that holds the most data."""
    import os
    import signal
    import threading
    import time

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            busy = client.run_on_scheduler(
                lambda dask_scheduler: sum(
                    len(ws.processing) for ws in dask_scheduler.workers.values()
                )
            )
            if when(busy):
                held = {address: 0 for address in pids}
                for where in client.who_has().values():
                    for address in where:
                        held[address] = held.get(address, 0) + 1
                victim = pids[max(pids, key=lambda address: held[address])]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
            time.sleep(0.02)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


def test_worker_killed_mid_run_gives_the_undisturbed_result(zarr_patches):
    """A worker process is killed during the fit; the nanny restarts it, Dask
    reruns its tasks (pure functions of batch and globals) and the result is
    the same as without the failure."""
    import os

    from distributed import Client, LocalCluster

    path, _ = zarr_patches
    kw = dict(
        covariance_type="zero-mean", sparsity=2, n_laps=4, random_state=3, batches_per_update=2,
        tol=1e-15,
    )  # fmt: skip
    reference = lsdask.GaussianMixture(5, client="sync", **kw).fit(path)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            killed: list[int] = []
            # kill one worker once its first tasks are running
            thread = _kill_a_worker_when(client, client.run(os.getpid), killed, lambda b: b > 0)
            model = lsdask.GaussianMixture(5, client=client, **kw).fit(path)
            thread.join(timeout=5)
    assert killed, "the test did not manage to kill a worker"
    np.testing.assert_allclose(model.elbo_trace_, reference.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(model.covariances_, reference.covariances_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("when", "algorithm"), [("busy", "memo"), ("idle", "memo"), ("busy", "vb")]
)
def test_in_memory_data_survives_a_lost_worker(zarr_patches, when, algorithm, caplog):
    """In-memory batches are scattered once and the globals once per update: a
    worker lost with them failed the fit (FutureCancelledError: lost
    dependencies; CommClosedError from the broadcast when it died between
    waves). The executor now sends them again from the driver and reruns the
    wave, and the result is the undisturbed one."""
    import logging
    import os

    from distributed import Client, LocalCluster

    _, X = zarr_patches
    kw = dict(
        covariance_type="zero-mean", sparsity=2, n_laps=4, random_state=3, batches_per_update=2,
        tol=1e-15, algorithm=algorithm,
    )  # fmt: skip
    reference = lsdask.GaussianMixture(5, client="sync", **kw).fit(X)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            pids = client.run(os.getpid)
            killed: list[int] = []
            thread = _kill_a_worker_when(
                client, pids, killed, (lambda busy: busy > 0) if when == "busy" else
                (lambda busy: busy == 0 and len(client.who_has()) > 0)
            )  # fmt: skip
            with caplog.at_level(logging.WARNING, logger="lsdask.engine.dask_executor"):
                model = lsdask.GaussianMixture(5, client=client, **kw).fit(X)
            thread.join(timeout=5)
    assert killed, "the test did not manage to kill a worker"
    assert "a Dask worker was lost" in caplog.text  # the executor had to recover
    np.testing.assert_allclose(model.elbo_trace_, reference.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(model.covariances_, reference.covariances_, rtol=1e-9, atol=1e-12)


def test_a_scheduler_without_workers_is_named_before_any_work(monkeypatch):
    """Against an external scheduler with no workers the fit ran its whole start
    (15 s of Gibbs sampling) and then failed with a traceback ending in
    'No valid workers found'."""
    from distributed import LocalCluster

    from lsdask import config

    monkeypatch.setattr(config, "WORKER_WAIT_SECONDS", 1)
    with LocalCluster(n_workers=0, dashboard_address=":0") as cluster:
        no_workers = r"cluster at tcp://.* has had no workers for 1 s; start workers \(dask worker"
        with pytest.raises(ValueError, match=no_workers):
            lsdask.GaussianMixture(3, n_laps=1, client=cluster.scheduler_address).fit(
                np.zeros((10, 2))
            )


def test_a_script_without_a_main_guard_is_told_how_to_fix_it(tmp_path):
    """Worker processes import the main script again: an unguarded fit cannot
    start its cluster, and the error says why and what to do."""
    import subprocess
    import sys

    script = tmp_path / "fit.py"
    script.write_text(
        "import numpy as np\n"
        "import lsdask\n"
        "X = np.random.default_rng(0).normal(size=(200, 3))\n"
        "lsdask.GaussianMixture(2, n_laps=1, n_workers=1, batch_size=100).fit(X)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "could not start a local Dask cluster" in last
    assert "if __name__ == '__main__':" in last and "client='sync'" in last
    assert "If this runs from a script" in last


def test_an_unreachable_scheduler_is_a_clear_error():
    import dask

    with pytest.raises(ValueError, match=r"client='bogus': could not connect .*client='sync'"):
        lsdask.GaussianMixture(2, client="bogus").fit(np.zeros((10, 2)))
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        match = r"client='tcp://127\.0\.0\.1:1': could not connect to a Dask scheduler.*--sync"
        # the environment, not the input: a ClusterError (lsdask exits with status 1)
        with pytest.raises(ClusterError, match=match):
            lsdask.GaussianMixture(2, client="tcp://127.0.0.1:1").fit(np.zeros((10, 2)))


def test_worker_memory_is_reported_for_the_progress_line(dask_client):
    executor = DaskExecutor(dask_client)
    rss = executor.memory()
    assert len(rss) == len(dask_client.scheduler_info()["workers"]) and min(rss) > 10 * 2**20


def test_sends_that_keep_timing_out_end_in_a_cluster_error(dask_client, monkeypatch):
    """'No valid workers found' (a TimeoutError: every worker paused, say) was
    retried without a count or a word and ended in AssertionError('unreachable')."""
    from lsdask import config
    from lsdask.errors import ClusterError

    executor = DaskExecutor(dask_client)
    monkeypatch.setattr(config, "LOST_WORKER_RETRIES", 1)

    def no_valid_workers(obj, broadcast=False):
        raise TimeoutError("No valid workers found")

    monkeypatch.setattr(executor, "_scatter", no_valid_workers)
    monkeypatch.setattr("lsdask.engine.dask_executor.time.sleep", lambda s: None)
    with pytest.raises(ClusterError, match=r"sending the globals to the Dask workers failed 2 "
                       r"times in a row \(TimeoutError: No valid workers found\)"):  # fmt: skip
        executor.broadcast(1.0)


def test_a_scheduler_lost_during_a_send_is_named(dask_client, monkeypatch):
    """A scheduler killed while the globals were sent: the send failed on a worker
    connection first, and the wait for workers then died on KeyError('workers')
    (the client's empty scheduler identity), a traceback instead of one line."""
    from distributed.comm.core import CommClosedError

    from lsdask.errors import ClusterError

    executor = DaskExecutor(dask_client)

    def reset(obj, broadcast=False):
        raise CommClosedError("in <TCP (closed) ConnectionPool.scatter>: Connection reset")

    monkeypatch.setattr(executor, "_scatter", reset)
    monkeypatch.setattr("lsdask.engine.dask_executor.time.sleep", lambda s: None)
    monkeypatch.setattr(dask_client, "scheduler_info", lambda **kw: {})  # what a lost one gives
    with pytest.raises(ClusterError, match=r"lost the connection to the Dask scheduler at .* "
                       r"Restart the cluster .* --resume DIR"):  # fmt: skip
        executor.broadcast(1.0)


def test_lda_transform_on_a_client_equals_in_process(dask_client, tmp_path):
    """LDA.transform ran in the driver even with a client; it now maps its batches
    over the cluster (a matrix and a corpus), with the in-process weights."""
    import scipy.sparse as sp

    from lsdask.io.corpus import Corpus

    rng = np.random.default_rng(0)
    X = sp.random(300, 40, density=0.15, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 4)
    lda = lsdask.LDA(5, sparsity=2, n_laps=2, batch_size=100, client="sync", random_state=0)
    lda.fit(X)
    corpus = Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(40)], docs_per_row_group=100)
    local = lda.transform(X)
    lda.set_params(client=dask_client)
    from distributed import get_task_stream

    for data in (X, corpus.path):
        with get_task_stream(client=dask_client) as stream:
            remote = lda.transform(data)
        assert sum("TransformTask" in task["key"] for task in stream.data) == 3  # on the cluster
        assert (remote != local).nnz == 0
    assert dask_client.status == "running"  # the caller's client is left open


def test_own_local_cluster_listens_on_loopback_only():
    """Issue 25, finding 3: the LocalCluster lsdask starts (scheduler, dashboard,
    nannies, workers) listens on 127.0.0.1 only; its dashboard bound 0.0.0.0
    while lsdask printed an http://127.0.0.1 link."""
    import ipaddress

    import psutil

    from lsdask.engine.dask_executor import start_local_cluster

    def listening() -> set[tuple[str, int]]:
        """The listening sockets of this process and its children."""
        procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
        return {
            (c.laddr[0], c.laddr[1])
            for proc in procs
            for c in proc.net_connections("inet")
            if c.status == psutil.CONN_LISTEN
        }

    before = listening()  # another test's cluster may still be up: not ours
    with start_local_cluster(1) as cluster:
        sockets = listening() - before
        dashboard_port = cluster.scheduler.http_server.port
        assert dashboard_port in {port for _, port in sockets}  # the dashboard's own socket
        exposed = [
            (host, port) for host, port in sockets if not ipaddress.ip_address(host).is_loopback
        ]
        assert exposed == [], f"listening beyond loopback: {exposed}"
        assert all(
            a.startswith("tcp://127.0.0.1:")
            for a in [
                cluster.scheduler_address,
                *(w.worker_address for w in cluster.workers.values()),
            ]
        )


def test_local_cluster_workers_do_not_run_the_profiler():
    """The statistical profiler of the workers lsdask starts is off (it cannot
    see inside the numba kernels and takes CPU from the tasks); a cluster
    started without lsdask keeps Dask's setting."""
    import dask
    from distributed import Client

    from lsdask.engine.dask_executor import start_local_cluster

    def profiling(dask_worker) -> tuple[bool, bool]:
        return (
            bool(dask.config.get("distributed.worker.profile.enabled")),
            "profile" in dask_worker.periodic_callbacks,
        )

    with start_local_cluster(1) as cluster, Client(cluster) as client:
        assert list(client.run(profiling).values()) == [(False, False)]
    assert dask.config.get("distributed.worker.profile.enabled")  # this process's unchanged
