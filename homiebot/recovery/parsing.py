"""Stage answers: the grammar a constrained backend decodes with, and a lenient parser for any text.

Each stage answers one JSON object (:mod:`homiebot.recovery.prompts`). A backend that constrains decoding
(llama.cpp, xgrammar, vLLM: the EBNF dialect of :mod:`homiebot.planner.constrained`) gets a grammar that
allows exactly that object, with steps built from the request's actions and the names the robot knows, so a
small model cannot write an unknown action or a malformed step. The parser does not rely on it: it reads a
JSON object anywhere in the text, else falls back to patterns (``"important": false``, a bare yes/no,
``[Pick, apple]`` or ``Pick(apple)`` steps). What it cannot read is reported as malformed (``None`` /
``ok=False``) and the stage applies its fallback (CMFR decision D8 of our specification: an unreadable
importance answer means "not important", an unreadable step list means "no steps").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from homiebot.types import Action, Subtask

#: Longest free-text reason a constrained answer may carry (characters; ASCII, so at most as many tokens).
REASON_MAX_CHARS = 80
#: Most steps one stage answer may add (each costs a round of the episode's 20; a small model fills whatever
#: the grammar allows, so the default is short).
MAX_STEPS = 2

_NAME_FORBIDDEN = set(',[]"\\\n\r')


def _literal(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _arity(action: str) -> int:
    parsed = Action.parse(action)
    return 2 if parsed is Action.PUT else 1


def step_forms(actions: Sequence[str]) -> str:
    """The actions a step may use, for the prompt: ``Go to, Pick, Put (object and place), Open, Close``. Not a
    list of example steps: SmolLM2-135M copied such a list verbatim as its answer."""
    forms = []
    for action in actions:
        if Action.parse(action) is Action.END:
            continue
        forms.append(f"{action} (object and place)" if _arity(action) == 2 else action)
    return ", ".join(forms)


def usable_names(names: Iterable[str]) -> list[str]:
    """Names that can stand inside a step and a JSON string (no ``,[]"\\`` or line breaks), unique, in order."""
    seen: dict[str, None] = {}
    for raw in names:
        name = raw.strip()
        if name and not set(name) & _NAME_FORBIDDEN:
            seen.setdefault(name, None)
    return list(seen)


def _common_rules(actions: Sequence[str], names: Sequence[str], reason_chars: int, max_steps: int) -> list[str]:
    step_options = []
    for action in actions:
        if Action.parse(action) is Action.END:
            continue
        args = ' ", " name' * _arity(action)
        step_options.append(f"({_literal(action)}{args})")
    name_rule = " | ".join(_literal(n) for n in names) if names else "[A-Za-z0-9_] [A-Za-z0-9 _.-]{0,47}"
    return [
        # Printable ASCII without '"', '[', '\\' and ']': a reason cannot end its string or look like a step.
        f'reason ::= "\\"" [ -!#-Z^-~]{{0,{reason_chars}}} "\\""',
        'steps ::= "[" (step (", " step){0,' + str(max_steps - 1) + '})? "]"',
        'step ::= "\\"[" (' + " | ".join(step_options) + ') "]\\""',
        f"name ::= {name_rule}",
        'bool ::= "true" | "false"',
    ]


def grammar(kind: str, actions: Sequence[str], names: Sequence[str], reason_chars: int = REASON_MAX_CHARS,
            max_steps: int = MAX_STEPS) -> str:
    """The EBNF grammar of one stage's answer (``importance``, ``preconditions``, ``workaround``,
    ``post_execution``, ``search``, ``locations`` or ``cot``) with at most ``max_steps`` steps."""
    return _grammar(kind, tuple(actions), tuple(names), reason_chars, max(1, max_steps))


@lru_cache(maxsize=256)  # rounds of an episode ask with the same actions and names
def _grammar(kind: str, actions: tuple[str, ...], names: tuple[str, ...], reason_chars: int, max_steps: int) -> str:
    rules = _common_rules(actions, usable_names(names), reason_chars, max_steps)
    roots = {
        "importance": '"{\\"reason\\": " reason ", \\"important\\": " bool "}"',
        "preconditions": '"{\\"reason\\": " reason ", \\"missing\\": " bool ", \\"steps\\": " steps "}"',
        "workaround": '"{\\"reason\\": " reason ", \\"steps\\": " steps "}"',
        "post_execution": '"{\\"reason\\": " reason ", \\"steps\\": " steps "}"',
        "search": '"{\\"steps\\": " steps "}"',
        "cot": '"{\\"reasoning\\": " reason ", \\"action\\": " ("\\"skip\\"" | "\\"insert\\"" | "\\"replace\\"") '
               '", \\"steps\\": " steps "}"',
        "locations": '"{\\"locations\\": [" (triple (", " triple){0,3})? "]}"',
    }
    if kind not in roots:
        raise ValueError(f"no grammar for stage answer {kind!r}")
    if kind == "locations":
        rules.append('triple ::= "[\\"" word "\\", \\"" ("in" | "on") "\\", \\"" word "\\"]"')
        rules.append("word ::= [A-Za-z0-9_] [A-Za-z0-9 _.-]{0,39}")
    return "\n".join([f"root ::= {roots[kind]}", *rules])


# ----------------------------------------------------------------------------------------- parsing


def json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (models often wrap it in prose or code fences), or None."""
    start = text.find("{")
    while start != -1:
        depth = 0
        in_string = escaped = False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    try:
                        value = json.loads(text[start:i + 1])
                    except (json.JSONDecodeError, RecursionError):
                        break
                    return value if isinstance(value, dict) else None
        start = text.find("{", start + 1)
    return None


_BOOL_FIELD = {
    "important": re.compile(r'"?important"?\s*[:=]\s*"?(true|false|yes|no)\b', re.IGNORECASE),
    "missing": re.compile(r'"?missing(?:_preconditions)?"?\s*[:=]\s*"?(true|false|yes|no)\b', re.IGNORECASE),
}
_BARE_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_REASON = re.compile(r'"?(?:reason|reasoning)"?\s*[:=]\s*"([^"]*)"', re.IGNORECASE)
_BRACKET_STEP = re.compile(r"\[([^\[\]\"]+)\]")
_CALL_STEP = re.compile(r"\b([A-Za-z][A-Za-z _]*?)\s*\(([^()]+)\)")
_ACTION_CHOICE = re.compile(r'"?action"?\s*[:=]\s*"?(skip|insert|replace)\b', re.IGNORECASE)


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    return None


def parse_bool(text: str, key: str) -> bool | None:
    """The answer's ``key`` (``important`` / ``missing``) as a bool, or None when unreadable."""
    data = json_object(text)
    if data is not None and key in data:
        value = _as_bool(data[key])
        if value is not None:
            return value
    match = _BOOL_FIELD[key].search(text)
    if match:
        return match.group(1).lower() in ("true", "yes")
    match = _BARE_YES_NO.match(text)
    if match:
        return match.group(1).lower() == "yes"
    return None


def parse_reason(text: str) -> str:
    data = json_object(text)
    if data is not None:
        for key in ("reason", "reasoning"):
            if isinstance(data.get(key), str):
                return " ".join(data[key].split())[:400]
    match = _REASON.search(text)
    return " ".join(match.group(1).split())[:400] if match else ""


def parse_choice(text: str) -> str | None:
    """The chain-of-thought answer's action (skip, insert, replace), or None."""
    data = json_object(text)
    if data is not None and isinstance(data.get("action"), str) and data["action"].strip().lower() in ("skip", "insert", "replace"):
        return str(data["action"]).strip().lower()
    match = _ACTION_CHOICE.search(text)
    return match.group(1).lower() if match else None


def _subtask_from_parts(parts: Sequence[str]) -> Subtask | None:
    parts = [p.strip().strip("'\"") for p in parts]
    if not parts or not parts[0]:
        return None
    action, args = parts[0], [p for p in parts[1:] if p]
    return Subtask(action, args[0] if args else None, args[1] if len(args) > 1 else None)


def _step_of(item: Any) -> Subtask | None:
    if isinstance(item, str):
        inner = item.strip()
        if inner.startswith("[") and inner.endswith("]"):
            return _subtask_from_parts(inner[1:-1].split(","))
        call = _CALL_STEP.fullmatch(inner)
        if call:
            return _subtask_from_parts([call.group(1), *call.group(2).split(",")])
        return _subtask_from_parts(inner.split(",")) if "," in inner else None
    if isinstance(item, list) and item and all(isinstance(p, str) for p in item):
        return _subtask_from_parts(item)
    return None


@dataclass(frozen=True)
class Steps:
    """Steps read from an answer: the valid ones, how many items were dropped, and whether anything was read."""

    steps: tuple[Subtask, ...]
    dropped: int
    ok: bool  # the answer had a readable step list (possibly empty)


def valid_step(step: Subtask, actions: Sequence[str]) -> Subtask | None:
    """``step`` with its action spelled as in ``actions``, or None when it is not executable as written (unknown
    action, End, a missing target or place)."""
    parsed = Action.parse(step.action)
    listed = {a.lower(): a for a in actions}
    canonical = listed.get(" ".join(step.action.lower().split()))
    if canonical is None or parsed is Action.END or not step.target:
        return None
    if parsed is Action.PUT and not step.place:
        return None
    place = step.place if parsed is Action.PUT else None
    return Subtask(canonical, step.target, place)


def parse_steps(text: str, actions: Sequence[str], key: str = "steps", max_steps: int = MAX_STEPS) -> Steps:
    """The steps of an answer (JSON list under ``key``, else every ``[...]`` / ``Verb(...)`` in the text)."""
    data = json_object(text)
    raw: list[Any] | None = None
    if data is not None:
        for name in (key, "subgoals", "subtasks"):
            if isinstance(data.get(name), list):
                raw = data[name]
                break
    if raw is None:
        found = [m.group(0) for m in _BRACKET_STEP.finditer(text)]
        if not found:
            found = [m.group(0) for m in _CALL_STEP.finditer(text)]
        if not found:
            # An answer with no list at all: readable only if it is a JSON object (then: no steps).
            return Steps((), 0, data is not None)
        raw = found
    steps: list[Subtask] = []
    dropped = 0
    for item in raw:
        step = _step_of(item)
        valid = valid_step(step, actions) if step is not None else None
        if valid is None:
            dropped += 1
        elif len(steps) < max_steps:
            steps.append(valid)
        else:
            dropped += 1
    return Steps(tuple(steps), dropped, True)


def parse_locations(text: str) -> list[tuple[str, str, str]]:
    """``[object, relation, place]`` triples (relation ``in`` / ``on``) from the locations answer."""
    data = json_object(text)
    items: list[Any] = data.get("locations", []) if isinstance(data, dict) else []
    if not isinstance(items, list):
        return []
    triples = []
    for item in items:
        if (isinstance(item, list) and len(item) == 3 and all(isinstance(p, str) and p.strip() for p in item)
                and item[1].strip().lower() in ("in", "on", "inside")):
            relation = "in" if item[1].strip().lower() == "inside" else item[1].strip().lower()
            triples.append((item[0].strip(), relation, item[2].strip()))
    return triples[:8]
