"""Which topics a lap's plan leaves out of its delete candidates.

A delete that the judgement rejects is likely to be rejected again while the
statistics change little, and judging it costs a rerun of its documents. A
topic whose delete was rejected ``n`` times since the topics last changed
their numbers rests ``2 ** n - 1`` laps (``n`` counted up to
:data:`MAX_DOUBLINGS`) before a plan may take it again: the first rejection
keeps it out of the next lap's plan only, repeated ones back off
exponentially. The deletes as a whole rest too (the record of topic
:data:`EVERY`): after ``f`` laps in a row whose judged deletes were all
rejected, the next ``2 ** (f - 1) - 1`` laps plan none, so that laps in which
nothing changes come to cost what an LDA lap costs. An accepted move renumbers
the topics and clears every rest, so a phase in which deletes succeed plans
them every lap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

#: the most times a topic's rest doubles (at most 2 ** 5 - 1 = 31 laps)
MAX_DOUBLINGS = 5

#: the topic number of the record by which every delete rests
EVERY = -1


class Rest(NamedTuple):
    """Topic ``topic`` is left out of the plans of laps before ``until``; its
    deletes were rejected ``fails`` times since the topics last changed."""

    topic: int
    until: int
    fails: int


def rests_after(previous: Iterable[Rest], lap: int, rejected: Iterable[int]) -> tuple[Rest, ...]:
    """The rests after the judgement of lap ``lap`` rejected the deletes of
    ``rejected`` and accepted nothing: ``previous`` with each rejected topic's
    count of rejections one up and its rest ``2 ** fails - 1`` laps from the next,
    and, where deletes were judged, the deletes' count of fruitless laps one up
    and their rest ``2 ** (fails - 1) - 1`` laps."""
    out = {r.topic: r for r in previous}
    rejected = [int(k) for k in rejected]
    for k in rejected:
        fails = min(out[k].fails + 1 if k in out else 1, MAX_DOUBLINGS)
        out[k] = Rest(k, int(lap) + 2**fails, fails)
    if rejected:
        fails = min(out[EVERY].fails + 1 if EVERY in out else 1, MAX_DOUBLINGS + 1)
        out[EVERY] = Rest(EVERY, int(lap) + 2 ** (fails - 1), fails)
    return tuple(out[k] for k in sorted(out))


def deletes_rest(rests: Iterable[Rest], lap: int) -> bool:
    """Whether lap ``lap`` plans no deletes at all."""
    return any(r.topic == EVERY and lap < r.until for r in rests)


def resting_topics(rests: Iterable[Rest], lap: int) -> set[int]:
    """The topics that lap ``lap``'s plan leaves out (the deletes' own record aside)."""
    return {r.topic for r in rests if r.topic != EVERY and lap < r.until}


def rest_lists(rests: Iterable[Rest]) -> dict[str, list[float]]:
    """``rests`` as the lists of floats a checkpoint keeps (none where there are none)."""
    rests = tuple(rests)
    if not rests:
        return {}
    return {
        "resting": [float(r.topic) for r in rests],
        "rest_until": [float(r.until) for r in rests],
        "rest_fails": [float(r.fails) for r in rests],
    }


def rests_of(carried: Mapping[str, Any] | None) -> tuple[Rest, ...]:
    """The rests that :func:`rest_lists` wrote into ``carried``. A checkpoint from
    before the back-off holds the topics only (rejected once, in the lap it was
    written after): they rest no further, with one rejection counted."""
    if carried is None or not carried.get("resting"):
        return ()
    topics = [int(k) for k in carried["resting"]]
    until = carried.get("rest_until")
    fails = carried.get("rest_fails")
    if until is None or fails is None:
        return tuple(Rest(k, 0, 1) for k in topics)
    if not len(topics) == len(until) == len(fails):
        raise ValueError(
            "resting, rest_until and rest_fails must be lists of one length; got "
            f"{len(topics)}, {len(until)} and {len(fails)} entries"
        )
    return tuple(Rest(k, int(u), int(f)) for k, u, f in zip(topics, until, fails, strict=True))
