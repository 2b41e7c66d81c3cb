"""The recovery prompts, written for HomieBot from the stage descriptions of CMFR (Farag et al., "Conditional
Multi-Stage Failure Recovery for Embodied Agents", REALM@ACL 2025, sections 4.3-4.5 and section 5 for the
chain-of-thought baseline).

The paper's own prompt listings (its appendix G, listings 3-7) are not available to us, so every template
here is RECONSTRUCTED: our wording, carrying the inputs the paper lists for each stage (task, plan so far,
failing step, scene representation, stage 1's reason for stages 2-3), plus the executor's error code and
message, which EMMOE's executor provides and TEACh's did not. Answers are one JSON object; its grammar is in
:mod:`homiebot.recovery.grammars`.

Templates use :class:`string.Template` fields (``$task``) so that the JSON braces need no escaping. A file
given as ``prompts=`` (JSON object: template name -> text) replaces any of them, e.g. the authors' listings
if they become available; unknown names or fields are refused when the file is loaded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from string import Template

SYSTEM_RECONSTRUCTED = (
    "You are the failure-recovery module of a household robot. Answer with one JSON object and nothing else."
)

IMPORTANCE_RECONSTRUCTED = """Task: $task
Steps so far: $plan
The robot failed this step: $subtask
The robot's report: $feedback ($code)
What the robot knows about the scene: $scene
Does the task still need this step, or can the robot drop it and go on with the task? Give a short reason first.
Answer: {"reason": "...", "important": true or false}"""

PRECONDITIONS_RECONSTRUCTED = """Task: $task
Steps so far: $plan
The robot failed this step: $subtask
The robot's report: $feedback ($code)
Why the step matters: $reason
What the robot knows about the scene: $scene
Some steps work only once something else holds: the hand must be empty to pick something up, a closed container must be opened before putting into it, the robot must stand near what it handles. Is such a condition missing for the failed step? If so, list the steps that set it up; the failed step is tried again after them.
Each step is one action ($forms) on names from the scene, written like "[Open, fridge]".
Answer: {"reason": "...", "missing": true or false, "steps": [...]}"""

WORKAROUND_RECONSTRUCTED = """Task: $task
Steps so far: $plan
The robot failed this step: $subtask
The robot's report: $feedback ($code)
Why the step matters: $reason
What the robot knows about the scene: $scene$tried
No missing condition explains the failure. Suggest steps that replace the failed step and reach the same aim, for example with another object of the same kind or another place.
Each step is one action ($forms) on names from the scene, written like "[Open, fridge]".
Answer: {"reason": "...", "steps": [...]}"""

POST_EXECUTION_RECONSTRUCTED = """Task: $task
Steps the robot carried out: $plan
What the robot knows about the scene: $scene
The robot has finished its plan. Compare what the task asks for with the scene: which steps are still needed? They may repeat earlier steps whose effect is missing. An empty list means the task is done.
Each step is one action ($forms) on names from the scene, written like "[Open, fridge]".
Answer: {"reason": "...", "steps": [...]}"""

SEARCH_RECONSTRUCTED = """The robot needs $object but has not seen it yet.
Where the task says things are: $locations
What the robot knows about the scene: $scene
List the steps that make $object visible (for example go to the place it is in and open it), using only the places above. If no place above is about $object, answer with an empty list.
Each step is one action ($forms), written like "[Open, fridge]".
Answer: {"steps": [...]}"""

LOCATIONS_RECONSTRUCTED = """Task: $task
List every place the task says an object is at, as [object, relation, place] with relation "in" or "on". Use an empty list if the task names no such place.
Answer: {"locations": [["object", "in", "place"]]}"""

COT_RECONSTRUCTED = """Task: $task
Steps so far: $plan
The robot failed this step: $subtask
The robot's report: $feedback ($code)
What the robot knows about the scene: $scene
Think step by step about why the step failed and what the robot should do: skip it, insert steps before trying it again, or replace it with other steps.
Each step is one action ($forms) on names from the scene, written like "[Open, fridge]".
Answer: {"reasoning": "...", "action": "skip" or "insert" or "replace", "steps": [...]}"""

#: Every template by name, and the fields it may use.
DEFAULT_PROMPTS: dict[str, str] = {
    "system": SYSTEM_RECONSTRUCTED,
    "importance": IMPORTANCE_RECONSTRUCTED,
    "preconditions": PRECONDITIONS_RECONSTRUCTED,
    "workaround": WORKAROUND_RECONSTRUCTED,
    "post_execution": POST_EXECUTION_RECONSTRUCTED,
    "search": SEARCH_RECONSTRUCTED,
    "locations": LOCATIONS_RECONSTRUCTED,
    "cot": COT_RECONSTRUCTED,
}
_FIELDS: dict[str, frozenset[str]] = {
    "system": frozenset(),
    "importance": frozenset({"task", "plan", "subtask", "feedback", "code", "scene"}),
    "preconditions": frozenset({"task", "plan", "subtask", "feedback", "code", "reason", "scene", "forms"}),
    "workaround": frozenset({"task", "plan", "subtask", "feedback", "code", "reason", "scene", "tried", "forms"}),
    "post_execution": frozenset({"task", "plan", "scene", "forms"}),
    "search": frozenset({"object", "locations", "scene", "forms"}),
    "locations": frozenset({"task"}),
    "cot": frozenset({"task", "plan", "subtask", "feedback", "code", "scene", "forms"}),
}


class PromptError(ValueError):
    """A prompt file cannot be used (not found, not a JSON object of strings, unknown name or field)."""


class PromptSet:
    """The templates in use: the defaults, with any replaced from a file."""

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        texts = dict(DEFAULT_PROMPTS)
        for name, text in (overrides or {}).items():
            if name not in DEFAULT_PROMPTS:
                raise PromptError(f"unknown prompt {name!r}; known: {', '.join(sorted(DEFAULT_PROMPTS))}")
            if not isinstance(text, str):
                raise PromptError(f"prompt {name!r} must be a string")
            used = {m.group("named") or m.group("braced") for m in Template.pattern.finditer(text)} - {None}
            unknown = used - _FIELDS[name]
            if unknown:
                raise PromptError(f"prompt {name!r} uses unknown field(s) {', '.join(sorted(unknown))}; "
                                  f"it may use: {', '.join(sorted(_FIELDS[name])) or 'none'}")
            texts[name] = text
        self.templates = {name: Template(text) for name, text in texts.items()}

    @classmethod
    def from_file(cls, path: str | Path) -> PromptSet:
        file = Path(path)
        if not file.is_file():
            raise PromptError(f"prompt file not found: {file}")
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise PromptError(f"{file}: not JSON ({err.msg}, line {err.lineno})") from None
        if not isinstance(data, dict):
            raise PromptError(f"{file}: a prompt file is a JSON object of template name -> text")
        return cls(data)

    def render(self, name: str, **fields: str) -> str:
        return self.templates[name].safe_substitute(**fields)
