"""EMMOE goals as PARTNR evaluation functions, so that EMMOE-100 reports percent complete beside SR.

A :class:`~homiebot.tasks.goals.GoalSpec` is a final-state conjunction; its PARTNR twin has one proposition per
condition (or per object, where PC should count objects), every proposition in the terminal-satisfaction
constraint except inspections (the furniture only has to have been open at some point), and no ordering.
Selectors are resolved once, on the state after the reset, so the function names scene instances as PARTNR's
functions name simulator handles. docs/partnr.md ("EMMOE goals") has the table and the decisions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from homiebot.tasks.goals import (
    Articulation,
    Cleared,
    Condition,
    Count,
    GoalSpec,
    Holding,
    Inspected,
    Placed,
    PoweredOff,
    RobotIn,
    matches_category,
    select,
)
from homiebot.tasks.partnr.language import (
    EvaluationFunction,
    EvaluationProposition,
    TemporalConstraint,
    TerminalSatisfactionConstraint,
    validate,
)
from homiebot.types import EntityKind, WorldState

if TYPE_CHECKING:
    from homiebot.tasks.suite import TaskSpec

_PLACE_PREDICATE = {"on": "is_on_top", "in": "is_inside"}


def _propositions(cond: Condition, initial: WorldState) -> list[EvaluationProposition]:
    def prop(name: str, **args: Any) -> EvaluationProposition:
        return EvaluationProposition(name, args)

    if isinstance(cond, Placed):
        objects = select(cond, initial, initial)
        if cond.all:
            # PARTNR's "put all the X" pattern: one proposition per object.
            return [prop(_PLACE_PREDICATE[cond.relation], object_handles=[o], receptacle_handles=[cond.receptacle])
                    for o in objects]
        if cond.distinct:
            # One proposition whose number unrolls to one per kind; a DifferentArgConstraint over copies of one
            # OR-list proposition would pin every copy to the first object placed (each reports one object).
            return [prop("has_distinct_categories", object_handles=objects, receptacle_handles=[cond.receptacle],
                         relation=cond.relation, number=cond.count)]
        return [prop(_PLACE_PREDICATE[cond.relation], object_handles=objects, receptacle_handles=[cond.receptacle],
                     number=cond.count)]
    if isinstance(cond, Count):
        return [prop("count_equals", object_handles=select(cond, initial, initial),
                     receptacle_handles=[cond.receptacle], relation=cond.relation, equals=cond.equals)]
    if isinstance(cond, Cleared):
        def concerned(name: str) -> bool:
            ent = initial.entities[name]
            return ent.kind is EntityKind.OBJECT and not any(matches_category(ent, c) for c in cond.except_)

        elsewhere = sorted(n for n, e in initial.entities.items()
                           if e.kind is EntityKind.FURNITURE and n != cond.receptacle)
        taken = sorted(n for n in initial.objects_in(cond.receptacle) if concerned(n))
        # Each item put away somewhere else (one proposition each, so PC counts items), and nothing left there.
        props = [prop("is_on_or_in", object_handles=[o], receptacle_handles=elsewhere) for o in taken]
        everything = sorted(n for n in initial.entities if concerned(n))
        props.append(prop("count_equals", object_handles=everything, receptacle_handles=[cond.receptacle],
                          relation="on_or_in", equals=0))
        return props
    if isinstance(cond, Articulation):
        return [prop("is_open" if cond.state == "open" else "is_closed", object_handles=[cond.furniture])]
    if isinstance(cond, Inspected):
        return [prop("is_open", object_handles=[cond.furniture])]
    if isinstance(cond, PoweredOff):
        return [prop("is_powered_off", object_handles=[cond.furniture])]
    if isinstance(cond, RobotIn):
        return [prop("is_robot_in_room", room_ids=[cond.room])]
    if isinstance(cond, Holding):
        return [prop("is_held", object_handles=select(cond, initial, initial))]
    raise TypeError(f"no PARTNR form for condition {cond!r}")


def goal_to_evaluation(goal: GoalSpec, initial: WorldState, task_id: str = "?") -> EvaluationFunction:
    """The evaluation function of an EMMOE goal in the scene state ``initial``; validated against the scene."""
    propositions: list[EvaluationProposition] = []
    terminal: list[int] = []
    for cond in goal.all:
        for p in _propositions(cond, initial):
            if not isinstance(cond, Inspected):
                terminal.append(len(propositions))
            propositions.append(p)
    n = len(propositions)
    function = EvaluationFunction(
        tuple(propositions),
        (),
        (TemporalConstraint((), n), TerminalSatisfactionConstraint(tuple(terminal), n)),
    )
    validate(function, task_id, initial.entities)
    return function


def task_function(task: TaskSpec, initial: WorldState) -> EvaluationFunction:
    """The task's own evaluation function, else its goal converted on the state after the reset."""
    if task.evaluation is not None:
        return EvaluationFunction.from_json(task.evaluation, task.id, initial.entities)
    return goal_to_evaluation(task.goal, initial, task.id)
