"""The all-null rating of an agent without evidence is scored once per model and copied for each agent
(RatingView.unrated): the copy must be what scoring that agent at that time gives, for every servable
model, at times far apart (it reads no time)."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from trustscore.errors import InvalidInput
from trustscore.exams.loader import ExamDirs
from trustscore.services import public as public_module
from trustscore.services.kept import MAX_STALE
from trustscore.services.public import PublicService
from trustscore.services.ratings import RatingView, load_models
from trustscore.settings import SERVABLE_MODELS

TIMES = [
    dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
    dt.datetime(2026, 12, 6, 5, 59, 1, 123456, tzinfo=dt.UTC),
    dt.datetime(2104, 11, 7, tzinfo=dt.UTC),  # near the end of trustscore-v3's range
]
AGENTS = ["ts1_" + "f" * 40, "ts1_" + "0123456789abcdef" * 2 + "01234567", "ts1_" + "0" * 39 + "1"]


@pytest.mark.parametrize("model", SERVABLE_MODELS)
def test_copied_rating_is_the_scored_one(model: str) -> None:
    now = [TIMES[1]]
    view = RatingView(load_models(names=SERVABLE_MODELS), clock=lambda: now[0])
    weights = view.model(model)
    for at in TIMES:  # the first call (at TIMES[0]) is the one that scores; the others copy it
        now[0] = at
        for agent in AGENTS:
            copied = view.unrated(agent, model)
            rating, medals = view.scored_without_evidence(weights, agent, at)
            assert (copied.rating, copied.medals, copied.at, copied.log_size) == (rating, medals, at, 0)
            assert msgspec.json.encode(copied.rating) == msgspec.json.encode(rating)
            assert msgspec.json.encode(copied.medals) == msgspec.json.encode(medals)


def test_copies_share_no_dict() -> None:
    view = RatingView(load_models(names=SERVABLE_MODELS))
    a, b = view.unrated(AGENTS[0]), view.unrated(AGENTS[1])
    assert a.rating.agent == AGENTS[0] and b.rating.agent == AGENTS[1]
    assert a.rating.dimensions is not b.rating.dimensions
    assert a.rating.null_reasons is not b.rating.null_reasons
    assert a.rating.uncertainty is not None and b.rating.uncertainty is not None
    assert a.rating.uncertainty.dimensions is not b.rating.uncertainty.dimensions
    assert a.medals is not None and b.medals is not None
    assert a.medals.dimensions is not b.medals.dimensions


def test_an_anchored_model_refuses_a_time_out_of_its_range_as_scoring_does() -> None:
    now = [TIMES[1]]
    view = RatingView(load_models(names=SERVABLE_MODELS), clock=lambda: now[0])
    view.unrated(AGENTS[0], "trustscore-v3")  # the all-null rating is kept
    weights = view.model("trustscore-v3")
    for at in (dt.datetime(1, 1, 1, tzinfo=dt.UTC), dt.datetime(2104, 11, 9, tzinfo=dt.UTC)):
        now[0] = at
        with pytest.raises(InvalidInput, match="half-lives"):
            view.scored_without_evidence(weights, AGENTS[0], at)
        with pytest.raises(InvalidInput, match="half-lives"):
            view.unrated(AGENTS[0], "trustscore-v3")
        view.unrated(AGENTS[0], "trustscore-v2")  # a model without an anchor has no range


def test_an_idle_agents_body_stamp_moves_with_time_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept rating bodies are made again in the background when their stamp's rating object changes
    (services/kept.py); an agent without a rating has no rating object to change, so its stamp takes a
    marker that changes every MAX_STALE seconds, as a decay refresh changes a rated agent's rating."""
    now = [MAX_STALE * 1000]  # the start of a period
    monkeypatch.setattr(public_module.time, "monotonic", lambda: now[0])  # type: ignore[attr-defined]
    public = PublicService(None, None, RatingView(load_models()), ExamDirs())  # type: ignore[arg-type]
    first = public._no_rating()
    now[0] += MAX_STALE / 2
    assert public._no_rating() is first or int(now[0] // MAX_STALE) != int(
        (now[0] - MAX_STALE / 2) // MAX_STALE
    )
    now[0] += MAX_STALE
    assert public._no_rating() is not first
