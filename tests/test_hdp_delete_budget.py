"""The HDP's adaptive delete budget (MoveSettings.next_budget).

A lap whose judged deletes were all rejected halves the next lap's budget of
rerun documents (down to a floor); a lap that accepted one doubles it (up to
``delete_work``). The plan holds its candidates' target documents to the budget,
and the budget travels with the sticks through checkpoints (``carry``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import lsdask
from lsdask.models.hdp import HDPGlobals
from lsdask.models.hdp_moves import MoveOutcome, MoveRecord, MoveSettings, choose_plan
from lsdask.models.hdp_rests import Rest
from lsdask.synthetic import make_bars_corpus

MOVES = MoveSettings(delete=True, merge=True, delete_max_docs=1000, max_pairs=20)


@pytest.fixture(scope="module")
def warm():
    """An HDP with 24 topics after 3 laps without moves, and its statistics."""
    X, _ = make_bars_corpus(800, doc_topic_prior=0.3, random_state=3)
    est = lsdask.HDP(24, moves=(), n_laps=3, sparsity=3, client="sync", random_state=1,
                     batch_size=200, tol=0.0, init="kmeans++").fit(X)  # fmt: skip
    model = dataclasses.replace(est.model_, moves=MOVES)
    stats = model.local_step(X, est.posterior_, 3)
    return model, est.posterior_, stats


def test_next_budget_halves_after_rejections_and_doubles_after_an_acceptance():
    s = MoveSettings(delete=True, delete_work=0.1, delete_work_floor=0.01)
    assert s.next_budget(None, judged=5, accepted=0) == pytest.approx(0.05)
    assert s.next_budget(0.05, judged=5, accepted=0) == pytest.approx(0.025)
    assert s.next_budget(0.015, judged=3, accepted=0) == pytest.approx(0.01)  # the floor
    assert s.next_budget(0.01, judged=3, accepted=0) == pytest.approx(0.01)
    assert s.next_budget(0.025, judged=4, accepted=1) == pytest.approx(0.05)
    assert s.next_budget(0.08, judged=4, accepted=2) == pytest.approx(0.1)  # the cap
    assert s.next_budget(0.03, judged=0, accepted=0) == pytest.approx(0.03)  # nothing judged
    assert s.next_budget(None, judged=0, accepted=0) == pytest.approx(0.1)


def test_the_plan_holds_its_targets_to_the_budget(warm):
    model, _, stats = warm
    D = float(stats.array("n_docs")[0])
    used = stats.array("Dused")
    cos = np.eye(model.n_components)
    loose = MoveSettings(delete=True, delete_max_docs=1000, max_deletes=24, delete_work=1.0)
    plans = {b: choose_plan(stats, cos, loose, 2, (), b) for b in (1.0, 0.5, 0.2, 0.05)}
    assert choose_plan(stats, cos, loose, 2, (), None) == plans[1.0]
    targets = {b: float(used[list(p.deletes)].sum()) for b, p in plans.items()}
    for b, t in targets.items():
        assert t <= b * D
    assert len(plans[1.0].deletes) > len(plans[0.05].deletes)


def test_the_outcome_carries_the_next_budget(warm):
    model, glob, _ = warm
    rejected = [MoveRecord("delete", (k,), -1.0, False) for k in (3, 5)]
    out = MoveOutcome(model, glob.rho, glob.omega, 0.04, records=list(rejected))
    assert out.carried["delete_budget"] == [pytest.approx(0.02)]
    assert out.carried["resting"] == [-1.0, 3.0, 5.0]  # -1: the deletes as a whole
    took = [MoveRecord("delete", (3,), 2.0, True), MoveRecord("delete", (4,), -1.0, False)]
    out = MoveOutcome(model, glob.rho, glob.omega, 0.04, records=took)
    assert out.carried["delete_budget"] == [pytest.approx(0.08)]
    assert "resting" not in out.carried
    merged = [MoveRecord("merge", (1, 2), 3.0, True)]
    out = MoveOutcome(model, glob.rho, glob.omega, 0.04, records=merged)
    assert out.carried["delete_budget"] == [pytest.approx(0.04)]


def test_the_budget_survives_carry_and_restore_and_bad_values_are_refused(warm):
    model, glob, stats = warm
    assert isinstance(glob, HDPGlobals)
    rests = (Rest(4, 9, 2), Rest(7, 5, 1))
    with_budget = dataclasses.replace(glob, delete_budget=0.025, resting=rests)
    carried = model.carry(with_budget)
    assert carried["delete_budget"] == [0.025]
    back = model.restore_globals(stats, carried)
    assert back.delete_budget == 0.025 and back.resting == rests
    assert model.restore_globals(stats, model.carry(glob)).delete_budget is None
    for bad in ([0.0], [1.5], [float("nan")], [0.1, 0.2], "0.1"):
        with pytest.raises(ValueError, match="delete_budget"):
            model.restore_globals(stats, {**carried, "delete_budget": bad})
