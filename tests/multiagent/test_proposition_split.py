"""The expert pair's heuristic split of PARTNR propositions: state changes to the human, objects kept whole,
an even split otherwise; and on the whole PARTNR-style suite, every proposition has exactly one owner."""

from __future__ import annotations

from homiebot.multiagent.centralized import AgentRole
from homiebot.multiagent.split import owner_of, split_propositions
from homiebot.tasks.partnr.language import EvaluationFunction, EvaluationProposition
from homiebot.tasks.suite import load_suite

R, H = AgentRole.ROBOT, AgentRole.HUMAN


def prop(name: str, obj: str, place: str | None = None) -> EvaluationProposition:
    args: dict[str, object] = {"object_handles": [obj], "number": 1}
    if place is not None:
        args["receptacle_handles"] = [place]
    return EvaluationProposition(name, args)


def test_state_changes_go_to_the_human_and_objects_stay_whole():
    function = EvaluationFunction(
        (
            prop("is_on_top", "cup", "table"),  # 0: cup
            prop("is_powered_on", "lamp"),  # 1: human only
            prop("is_on_top", "plate", "table"),  # 2: plate
            prop("is_inside", "cup", "cabinet"),  # 3: cup again: same agent as 0
        )
    )
    split = split_propositions(function)
    assert split[H].count(1) == 1 and 1 not in split[R]
    assert owner_of(split, 0) == owner_of(split, 3)
    assert owner_of(split, 0) is R  # the larger group first, to the robot on a tie
    assert split == {R: [0, 3], H: [1, 2]}


def test_two_objects_are_shared_evenly():
    split = split_propositions(EvaluationFunction((prop("is_on_top", "a", "t"), prop("is_on_top", "b", "t"))))
    assert split == {R: [0], H: [1]}


def test_every_suite_proposition_has_exactly_one_owner():
    checked = 0
    for task in load_suite("partnr").tasks:
        function = task.evaluation
        if function is None:
            continue
        if not isinstance(function, EvaluationFunction):
            function = EvaluationFunction.from_json(function, task.id)
        split = split_propositions(function)
        assert sorted(split[R] + split[H]) == list(range(len(function.propositions))), task.id
        checked += 1
    assert checked > 300
