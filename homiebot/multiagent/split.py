"""The expert pair's division of labour: a heuristic split of a task's evaluation propositions between the
robot and the human (PARTNR's Heuristic-Expert "pre-plan[s] all steps for human and robot based on their
capabilities ... both agents might rearrange objects, but only humans perform cleaning, filling, and
toggling on/off tasks", §4.1 / table 2).

Rules (ours; PARTNR does not publish its split):

* state propositions (``is_powered_on/off``, ``is_clean``, ... the spec's "state" category) go to the
  human, the only role with those skills;
* the other propositions are grouped by the object they move (the first entity argument), so that one
  agent carries one object through all its propositions (two agents never reach for the same object);
* groups go, largest first, to the agent with fewer propositions so far, the robot on ties (PARTNR's ideal
  task offloading is 0.5: an even split).
"""

from __future__ import annotations

from collections.abc import Sequence

from homiebot.multiagent.centralized import AgentRole
from homiebot.tasks.partnr.language import EvaluationFunction, EvaluationProposition
from homiebot.tasks.partnr.predicates import PREDICATES, STATE_PREDICATES


def _object_key(proposition: EvaluationProposition) -> str:
    spec = PREDICATES.get(proposition.function_name)
    names = spec.entity_args if spec else ()
    for name in names:
        value = proposition.args.get(name)
        if value:
            flat = value[0] if isinstance(value, list | tuple) else value
            return repr(flat)
    return f"#{proposition.function_name}"


def split_propositions(function: EvaluationFunction) -> dict[AgentRole, list[int]]:
    """Proposition indices per agent, each list in the function's order."""
    share: dict[AgentRole, list[int]] = {AgentRole.ROBOT: [], AgentRole.HUMAN: []}
    groups: dict[str, list[int]] = {}
    for index, proposition in enumerate(function.propositions):
        if proposition.function_name in STATE_PREDICATES:
            share[AgentRole.HUMAN].append(index)
        else:
            groups.setdefault(_object_key(proposition), []).append(index)
    for members in sorted(groups.values(), key=lambda g: (-len(g), g[0])):
        role = AgentRole.ROBOT if len(share[AgentRole.ROBOT]) <= len(share[AgentRole.HUMAN]) else AgentRole.HUMAN
        share[role].extend(members)
    return {role: sorted(indices) for role, indices in share.items()}


def owner_of(split: dict[AgentRole, Sequence[int]], index: int) -> AgentRole:
    for role, indices in split.items():
        if index in indices:
            return role
    raise KeyError(f"proposition {index} is in no agent's share")
