"""A memoized run stopped mid-lap and resumed from its checkpoint, beside an
uninterrupted one: the driver the resume tests of several models share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lsdask.engine import SerialExecutor
from lsdask.errors import FitInterrupted
from lsdask.io.sources import as_batch_source
from lsdask.learn import MemoizedVI
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.persist.memo_files import DiskMemo


def stopped_and_resumed(
    model: Any,
    X: Any,
    init: Any,
    folder: Path,
    *,
    batch_size: int = 150,
    stop_after: int = 5,
    stop_lap: int = 2,
) -> tuple[Any, Any, dict[str, Any]]:
    """``(uninterrupted, resumed, checkpoint)``: 3 laps of memoized VI (2 batches
    per update, L=3) run through, and the same run stopped by a request after
    ``stop_after`` checks (in lap ``stop_lap``), then resumed (with another RNG)
    from what it wrote."""
    source = as_batch_source(X, batch_size)
    keys = [b.key for b in source.batches]
    learner = MemoizedVI(n_laps=3, tol=0.0, batches_per_update=2)
    uninterrupted = learner.run(
        model, SerialExecutor(), source.batches, model.global_step(init),
        np.random.default_rng(2), 3,
    )  # fmt: skip
    ckpt = CheckpointDir(folder)

    def write(state, memo, init_stats):
        return ckpt.write(state, memo, keys, {"model": {}, "params": {}}, init_stats)

    calls = iter(range(10_000))
    with pytest.raises(FitInterrupted):
        learner.run(
            model, SerialExecutor(), source.batches, model.global_step(init),
            np.random.default_rng(2), 3, memo=DiskMemo(ckpt.memo_folder, len(keys)),
            init_stats=init, checkpoint=write, stop_requested=lambda: next(calls) >= stop_after,
        )  # fmt: skip
    saved = ckpt.read()
    state = saved["state"]
    assert state.lap == stop_lap - 1 and 0 < state.position < len(keys)  # mid-lap
    memo = DiskMemo(ckpt.memo_folder, len(keys), [saved["memo"].get(k) for k in keys])
    resumed = learner.run(
        model, SerialExecutor(), source.batches, None, np.random.default_rng(99), 3,
        memo=memo, state=saved["state"], init_stats=saved["init_stats"], checkpoint=write,
    )  # fmt: skip
    return uninterrupted, resumed, saved
