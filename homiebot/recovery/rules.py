"""Stage answers from fixed rules instead of a model: a diagnostic control for the recovery ablation.

CMFR's appendix J lists, per action, the preconditions a recovery should infer (hold the object before placing
it, open a closed receptacle, go to what is far); the paper gives that table to illustrate what stage 2 is meant
to find, not to the model. Here the same preconditions are mapped onto EMMOE's error codes (as in the mapping of
the CMFR spec onto HomieBot: D1 far -> go there first, L2 hand empty -> pick the object first, L3 closed -> open
it first; and, from the world state, a pick that failed inside a closed receptacle -> open it first) and returned as the stage answers, in the JSON the stage prompts ask for. With ``rules=True`` the
wrapper asks these rules instead of its model, so an ablation row shows how far the stages' control flow carries
a base planner when stage 2 names the precondition the executor's report implies: it separates "the stage
model cannot infer the precondition" from "the base planner cannot use a recovered step".

Rules exist only where the report says what is missing. Stage 1 keeps every failed step (the rules cannot tell
a needless step from a needed one), stages 3 and 4, the object search and the CoT prompt answer "nothing"
(no rule proposes a substitute object or a missing step of the task), and the codes without a precondition
(L1 hand full: where to put the held object is a choice; L4, F2, E1, E2, D2, F1) get no steps.
"""

from __future__ import annotations

import json
import re

from homiebot.types import Action, ErrorCode, Subtask, WorldState

_SUBTASK = re.compile(r"^\[\s*([^,\]]+?)\s*(?:,\s*([^,\]]+?)\s*)?(?:,\s*([^,\]]+?)\s*)?\]$")


def parse_subtask(text: str) -> Subtask | None:
    """``"[Put, cup, table]"`` -> the subtask (the form :meth:`Subtask.text` writes); None for anything else."""
    match = _SUBTASK.match(text.strip())
    if match is None:
        return None
    action, target, place = match.groups()
    return Subtask(action=action, target=target, place=place)


def closed_container(state: WorldState | None, name: str | None) -> str | None:
    """The closed receptacle ``name`` is in, if any (read from the world state the wrapper may read)."""
    entity = state.entities.get(name) if state is not None and name else None
    parent = state.entities.get(entity.parent) if state is not None and entity is not None and entity.parent else None
    return parent.name if parent is not None and parent.articulated and parent.is_open is False else None


def preconditions(subtask: Subtask, code: ErrorCode, state: WorldState | None = None) -> list[str]:
    """The steps CMFR appendix J's preconditions imply for this failure, as ``[Action, name]`` texts. ``state``
    (optional) adds appendix J's third pick precondition, which no EMMOE code names: an object inside a closed
    receptacle is picked after opening it (the executor reports that pick as E1, too difficult)."""
    action = Action.parse(subtask.action)
    target, place = subtask.target, subtask.place
    container = closed_container(state, target) if action is Action.PICK else None
    if container is not None and code is ErrorCode.E1:
        return [f"[Open, {container}]"]
    if code is ErrorCode.D1:  # too far from what the step handles: go there first
        where = place if action is Action.PUT and place else target
        return [f"[Go to, {where}]"] if where else []
    if code is ErrorCode.L2 and action is Action.PUT and target:  # placing with an empty hand: pick it up first
        return [f"[Go to, {target}]", f"[Pick, {target}]"]
    if code is ErrorCode.L3 and action is Action.PUT and place:  # the receptacle is closed: open it first
        return [f"[Open, {place}]"]
    return []


def rule_answer(kind: str, subtask: str = "", code: str = "", state: WorldState | None = None) -> str:
    """The JSON answer of stage ``kind`` (a :mod:`homiebot.recovery.prompts` name) for the failed ``subtask``
    (its bracketed text) with EMMOE ``code``, in the world ``state`` when given."""
    if kind == "importance":
        return json.dumps({"reason": "rules keep every failed step", "important": True})
    if kind == "preconditions":
        parsed = parse_subtask(subtask)
        try:
            steps = preconditions(parsed, ErrorCode(code), state) if parsed is not None else []
        except ValueError:  # not an EMMOE code
            steps = []
        reason = f"rule for {code}: {', '.join(steps)} first" if steps else f"no rule for {code or 'this failure'}"
        return json.dumps({"reason": reason, "missing": bool(steps), "steps": steps})
    if kind == "locations":
        return json.dumps({"locations": []})
    if kind == "cot":
        return json.dumps({"reasoning": "no rule", "action": "skip", "steps": []})
    return json.dumps({"reason": "no rule", "steps": []})
