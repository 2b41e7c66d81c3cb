"""PARTNR's failure explanation: a short text saying which steps are missing or which constraints broke.

The sentences follow the structure of PARTNR's released explanations (a header, then one line per missing
step or broken constraint; docs/partnr.md lists them); entities are named by their semantic class, and an
OR-list reads "cup or mug". The phrases of HomieBot's extension predicates are ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from homiebot.tasks.partnr.language import (
    DifferentArgConstraint,
    EvaluationConstraint,
    EvaluationFunction,
    EvaluationProposition,
    SameArgConstraint,
    TemporalConstraint,
    TerminalSatisfactionConstraint,
)
from homiebot.tasks.partnr.predicates import CLUSTER_GROUPS_ARG, PropositionResult

MISSING_HEADER = "Episode failed. Missing steps:"
BROKEN_HEADER = "Episode failed. All steps were completed, but constraints were broken:"
SHOULD = " should have been"


def _names(handles: Any, categories: Mapping[str, str]) -> str:
    words: list[str] = []
    for handle in handles or ():
        word = categories.get(handle, handle).replace("_", " ")
        if word not in words:
            words.append(word)
    return " or ".join(words)


def phrase(prop: EvaluationProposition, categories: Mapping[str, str], should: bool = True) -> str:
    """One step in words: "cup should have been placed on top of the table"."""
    verb = SHOULD if should else ""
    args = prop.args
    name = prop.function_name

    def n(key: str) -> str:
        return _names(args.get(key), categories)

    if name == "is_in_room":
        return f"{n('object_handles')}{verb} moved to the {n('room_ids')}"
    if name == "is_inside":
        return f"{n('object_handles')}{verb} placed inside the {n('receptacle_handles')}"
    if name == "is_on_top":
        return f"{n('object_handles')}{verb} placed on top of the {n('receptacle_handles')}"
    if name == "is_on_floor":
        return f"{n('object_handles')}{verb} placed on the floor"
    if name == "is_next_to":
        return f"{n('entity_handles_a')}{verb} placed next to {n('entity_handles_b')}"
    if name == "is_clustered":
        groups = [_names(g, categories) for g in args.get(CLUSTER_GROUPS_ARG, ())]
        return f"{', '.join(groups)}{verb} clustered"
    if name.startswith("is_") and name.removeprefix("is_") in (
            "clean", "dirty", "filled", "empty", "powered_on", "powered_off"):
        return f"Object {n('object_handles')}{verb} {name.removeprefix('is_').replace('_', ' ')}"
    # HomieBot's extensions (our wording).
    if name == "is_open":
        return f"{n('object_handles')}{verb} opened"
    if name == "is_closed":
        return f"{n('object_handles')}{verb} closed"
    if name == "is_held":
        return f"{n('object_handles')}{verb} in the robot's hand"
    if name == "is_robot_in_room":
        return f"The robot{verb} in the {n('room_ids')}"
    if name == "is_on_or_in":
        return f"{n('object_handles')}{verb} put away on or in the {n('receptacle_handles')}"
    if name == "count_equals":
        return f"Exactly {args.get('equals')} of {n('object_handles')}{verb} {args.get('relation')} the {n('receptacle_handles')}"
    if name == "has_distinct_categories":
        return (f"{args.get('number', 1)} different kinds of {n('object_handles')}{verb} placed "
                f"{args.get('relation')} the {n('receptacle_handles')}")
    return f"{prop.text()}{verb} satisfied"


def _arg_is_object(arg: str) -> bool:
    return arg in ("object_handles", "entity_handles_a", "entity_handles_b") or arg.startswith(CLUSTER_GROUPS_ARG)


def _constraint_lines(con: EvaluationConstraint, function: EvaluationFunction, broken: list[int],
                      categories: Mapping[str, str]) -> str:
    props = function.propositions
    if isinstance(con, TemporalConstraint):
        graph = con.graph()
        text = "\nSteps were completed out of order:"
        for j in broken:
            text += f"\n - {phrase(props[j], categories, should=False)} should have been completed after:"
            for q in sorted(graph.predecessors(j)) if j in graph else ():
                text += f"\n   - {phrase(props[q], categories, should=False)}"
        return text
    if isinstance(con, TerminalSatisfactionConstraint):
        header = "\nCompleted steps were later undone:"
        listed = broken
    elif isinstance(con, (SameArgConstraint, DifferentArgConstraint)):
        same = isinstance(con, SameArgConstraint)
        arg = con.arg_names[0] if con.arg_names else ""
        if _arg_is_object(arg):
            header = ("\nThe same object should have been used for the following placements:" if same
                      else "\nDifferent objects should have been used for the following placements:")
        else:
            kind = ("room" if same else "rooms") if arg == "room_ids" else "furniture"
            header = (f"\nPlacements should have been made with the same {kind}:" if same
                      else f"\nPlacements should have been made with different {kind}:")
        listed = list(con.proposition_indices)
    else:
        header = f"\n{con.type_name} was broken:"
        listed = broken
    return header + "".join(f"\n - {phrase(props[i], categories)}" for i in listed)


def failure_explanation(function: EvaluationFunction, states: Sequence[Sequence[PropositionResult]],
                        satisfied_at: Sequence[int], categories: Mapping[str, str]) -> str:
    """"" on success; else the missing steps, or (all steps done) the constraints that were broken."""
    props = function.propositions
    missing: list[str] = []
    for i, t in enumerate(satisfied_at):
        if t == -1:
            line = phrase(props[i], categories)
            if line not in missing:  # unrolled copies of one proposition read the same
                missing.append(line)
    if missing:
        return MISSING_HEADER + "".join(f"\n - {m}" for m in missing)
    text = ""
    for con in function.constraints:
        broken = [i for i, ok in enumerate(con.check(states, satisfied_at)) if not ok]
        if broken:
            text += _constraint_lines(con, function, broken, categories)
    return BROKEN_HEADER + text if text else ""


def explanation_kind(explanation: str) -> str:
    """The kind an explanation is counted under in the metrics: "none", "missing steps", or the first
    constraint family named."""
    if not explanation:
        return "none"
    if explanation.startswith(MISSING_HEADER):
        return "missing steps"
    for line, kind in (("out of order", "out of order"), ("later undone", "undone"),
                       ("same", "same argument"), ("ifferent", "different argument")):
        if line in explanation:
            return kind
    return "constraint broken"



