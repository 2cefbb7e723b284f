"""The transition table (jobs.transitions): the life of a job, and the moves it refuses."""

import pytest

from jobs.models import Outcome, Stage
from jobs.transitions import TRANSITIONS, Event, InvalidTransition, next_stage


def test_the_table_is_the_life_of_a_job():
    life = [Stage.SUBMIT]
    for event in (Event.HOLD, Event.START, Event.FINISH, Event.COLLECT):
        life.append(next_stage(life[-1], event))
    assert life == [Stage.SUBMIT, Stage.RENT, Stage.RUN, Stage.OUTPUT, Stage.RELEASE]


def test_nothing_leaves_release():
    assert not [key for key in TRANSITIONS if key[0] == Stage.RELEASE]


@pytest.mark.parametrize(
    "stage, event",
    [(Stage.RUN, Event.CANCEL), (Stage.OUTPUT, Event.CANCEL), (Stage.SUBMIT, Event.LOSE), (Stage.RENT, Event.FINISH),
     (Stage.SUBMIT, Event.COLLECT), (Stage.RUN, Event.REJECT)],
)  # fmt: skip
def test_a_move_the_table_does_not_name_is_refused(stage, event):
    with pytest.raises(InvalidTransition):
        next_stage(stage, event)


def test_an_event_gives_only_its_own_outcomes():
    with pytest.raises(InvalidTransition):
        next_stage(Stage.OUTPUT, Event.COLLECT, outcome=Outcome.REJECTED)
    assert next_stage(Stage.SUBMIT, Event.REJECT, outcome=Outcome.REJECTED) == Stage.RELEASE
