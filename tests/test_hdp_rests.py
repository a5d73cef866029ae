"""Delete candidates that keep being rejected rest longer (lsdask.models.hdp_rests).

The first rejection keeps a topic out of the next lap's plan only; each further
one doubles its rest, up to 31 laps; an accepted move clears every rest; the
rests travel through checkpoints (``carry``) and are read back exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import lsdask
from lsdask.models.hdp_moves import MoveOutcome, MoveRecord, MoveSettings, choose_plan
from lsdask.models.hdp_rests import (
    EVERY,
    MAX_DOUBLINGS,
    Rest,
    deletes_rest,
    rest_lists,
    resting_topics,
    rests_after,
    rests_of,
)
from lsdask.synthetic import make_bars_corpus


def test_rejections_in_a_row_double_the_rest():
    rests = rests_after((), 2, [5])
    assert rests == (Rest(EVERY, 3, 1), Rest(5, 4, 1))
    assert resting_topics(rests, 3) == {5} and resting_topics(rests, 4) == set()
    assert not deletes_rest(rests, 3)  # one fruitless lap: deletes go on
    rests = rests_after(rests, 3, [5, 8])  # 5 again: 3 laps; 8 for the first time: 1
    assert rests == (Rest(EVERY, 5, 2), Rest(5, 7, 2), Rest(8, 5, 1))
    assert [deletes_rest(rests, lap) for lap in (4, 5)] == [True, False]
    assert [sorted(resting_topics(rests, lap)) for lap in range(4, 8)] == [[5, 8], [5], [5], []]
    rests = rests_after(rests, 5, [9])  # a third fruitless lap: deletes rest 3 laps
    assert rests[0] == Rest(EVERY, 9, 3)
    assert [deletes_rest(rests, lap) for lap in range(6, 10)] == [True, True, True, False]
    assert rests_after(rests, 9, []) == rests  # nothing judged: nothing changes
    for lap in range(9, 60, 2):
        rests = rests_after(rests, lap, [5])
    assert rests[0].fails == MAX_DOUBLINGS + 1 and rests[0].until == 59 + 2**MAX_DOUBLINGS
    assert rests[1].fails == MAX_DOUBLINGS and rests[1].until == 59 + 2**MAX_DOUBLINGS
    assert rests[2] == Rest(8, 5, 1)  # kept, resting no more


def test_rests_round_trip_and_old_or_bad_checkpoints():
    rests = (Rest(2, 7, 2), Rest(9, 5, 1))
    assert rests_of(rest_lists(rests)) == rests
    assert rest_lists(()) == {} and rests_of(None) == () and rests_of({}) == ()
    assert rests_of({"resting": [3.0, 4.0]}) == (Rest(3, 0, 1), Rest(4, 0, 1))
    with pytest.raises(ValueError, match="one length"):
        rests_of({"resting": [3.0], "rest_until": [5.0, 6.0], "rest_fails": [1.0]})


@pytest.fixture(scope="module")
def warm():
    X, _ = make_bars_corpus(800, doc_topic_prior=0.3, random_state=3)
    est = lsdask.HDP(24, moves=(), n_laps=3, sparsity=3, client="sync", random_state=1,
                     batch_size=200, tol=0.0, init="kmeans++").fit(X)  # fmt: skip
    moves = MoveSettings(delete=True, merge=False, delete_max_docs=1000, max_deletes=24,
                         delete_work=1.0)  # fmt: skip
    model = dataclasses.replace(est.model_, moves=moves)
    return model, est.posterior_, model.local_step(X, est.posterior_, 3)


def test_the_plan_leaves_resting_topics_out_until_their_lap(warm):
    model, _, stats = warm
    cos = np.eye(model.n_components)
    free = choose_plan(stats, cos, model.moves, 6, (), None).deletes
    first, second = free[0], free[1]
    rests = (Rest(first, 9, 2), Rest(second, 6, 1))
    assert choose_plan(stats, cos, model.moves, 6, rests, None).deletes == tuple(
        k for k in free if k != first
    )
    assert first not in choose_plan(stats, cos, model.moves, 8, rests, None).deletes
    assert choose_plan(stats, cos, model.moves, 9, rests, None).deletes == free
    paused = (Rest(EVERY, 8, 2), *rests)
    assert choose_plan(stats, cos, model.moves, 7, paused, None).deletes == ()
    assert choose_plan(stats, cos, model.moves, 8, paused, None).deletes


def test_the_outcome_carries_rests_and_an_acceptance_clears_them(warm):
    model, glob, _ = warm
    before = (Rest(3, 6, 2), Rest(11, 4, 1))
    rejected = [MoveRecord("delete", (k,), -1.0, False) for k in (3, 5)]
    out = MoveOutcome(model, glob.rho, glob.omega, 0.1, records=rejected, lap=6, rests=before)
    assert rests_of(out.carried) == (
        Rest(EVERY, 7, 1),
        Rest(3, 14, 3),
        Rest(5, 8, 1),
        Rest(11, 4, 1),
    )
    idle = MoveOutcome(model, glob.rho, glob.omega, 0.1, lap=6, rests=before)
    assert rests_of(idle.carried) == before  # nothing judged: the rests go on
    for took in (MoveRecord("delete", (5,), 2.0, True), MoveRecord("merge", (1, 2), 2.0, True)):
        out = MoveOutcome(model, glob.rho, glob.omega, 0.1, records=[*rejected, took], lap=6,
                          rests=before)  # fmt: skip
        assert "resting" not in out.carried
