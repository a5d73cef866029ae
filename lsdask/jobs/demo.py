"""``lsdask demo``: the patch GMM and the bars LDA on one Dask client, no download.

:func:`run_full_demo` starts (or connects to) one cluster with
:func:`lsdask.jobs.cluster.dask_client` and runs both jobs on it:
:func:`lsdask.jobs.patch_gmm.run_demo` (L-sparse vs dense Gaussian mixture
of 8x8 patches of a sample photograph) and
:func:`lsdask.jobs.bars_lda.run_bars_demo` (L-sparse LDA on the synthetic
bars corpus). :func:`format_demo_report` prints both reports.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from lsdask.jobs.bars_lda import format_bars_report, run_bars_demo
from lsdask.jobs.cluster import dask_client
from lsdask.jobs.patch_gmm import format_report, run_demo

logger = logging.getLogger(__name__)

__all__ = ["format_demo_report", "run_full_demo"]

PATCH_TITLE = (
    "[1/2] zero-mean Gaussian mixture of 8x8 patches of a photograph (matplotlib's sample) "
    "(Hughes & Sudderth, Sec. 4)"
)
BARS_TITLE = "[2/2] LDA on the synthetic bars corpus (Griffiths & Steyvers 2004)"


def run_full_demo(
    out_dir: str | os.PathLike[str] = "lsdask-demo",
    *,
    n_components: int = 25,
    sparsity: int | None = 4,
    n_laps: int = 10,
    bars_laps: int = 20,
    client: Any = None,
    n_workers: int | None = None,
    random_state: int = 0,
    verbose: bool = False,
    progress: bool | None = False,
) -> dict[str, Any]:
    """Run both demo jobs on one Dask client.

    Parameters
    ----------
    out_dir : str or os.PathLike, default "lsdask-demo"
        ``patches/``, ``elbo.png`` and ``clusters.png`` of the patch GMM and
        ``topics.png`` of the bars LDA.
    n_components, sparsity, n_laps
        K, L and maximum laps of the patch GMM.
    bars_laps : int, default 20
        Maximum laps of the bars LDA (K=10, L=4).
    client : None, "sync", str or distributed.Client, default None
        None starts one LocalCluster of ``n_workers`` (default 2) processes
        for both jobs; see :func:`lsdask.jobs.cluster.dask_client`.
    n_workers : int or None, default None
    random_state : int, default 0
    verbose : bool, default False
    progress : bool or None, default False

    Returns
    -------
    dict
        ``patch_gmm`` (:func:`~lsdask.jobs.patch_gmm.run_demo`'s result),
        ``bars_lda`` (:func:`~lsdask.jobs.bars_lda.run_bars_demo`'s result)
        and ``seconds`` (wall time of both, cluster start included).
    """
    start = time.perf_counter()
    out = Path(out_dir)
    with dask_client(client, n_workers) as shared:
        patches = run_demo(
            out,
            n_components=n_components,
            sparsity=sparsity,
            n_laps=n_laps,
            client=shared,
            random_state=random_state,
            verbose=verbose,
            progress=progress,
        )
        bars = run_bars_demo(
            out,
            n_laps=bars_laps,
            client=shared,
            random_state=random_state,
            verbose=verbose,
            progress=progress,
        )
    return {"patch_gmm": patches, "bars_lda": bars, "seconds": time.perf_counter() - start}


def format_demo_report(result: dict[str, Any]) -> str:
    """Both reports of :func:`run_full_demo`, separated by a blank line."""
    return "\n\n".join(
        [
            format_report(result["patch_gmm"], title=PATCH_TITLE),
            format_bars_report(result["bars_lda"], title=BARS_TITLE),
        ]
    )
