"""A ReAct tool planner (``--planner react``): PARTNR's thought / tool call / observation loop over the text
world description, on the same CPU text engine as the SmolLM2 planner.

PARTNR (Chang et al., 2024, §4 and appendix A.9) plans with ReAct agents: each LLM call writes a thought and
one tool call, ends at ``Assigned!``, and the tool's result comes back as the next user turn. This module is
that loop mapped onto HomieBot's round (docs/react.md):

* **Acting tools** become one EMMOE subtask each, executed by the loop's executor like any planner's answer
  (the answer handed to the loop is EMMOE's ``Analysis / Subtask / Model`` text, so parsing, F1/F2 checks,
  records and metrics are the same for every planner): Navigate -> Go to, Pick -> Pick, Place -> Put,
  Open / Close, PowerOn / PowerOff -> Turn on / Turn off, Clean -> Clean and Fill -> Fill (at the furniture
  last navigated to: our Clean and Fill act on the held object at a furniture with a sink), Pour -> Pour (the
  held object into the named container), Done -> End. Rearrange is PARTNR's
  "pick, move to the furniture, place" macro: it unrolls into Go to, Pick, Go to, Put over the next rounds,
  stopping at the first failure.
* **Perception tools** (FindObjectTool, FindReceptacleTool, FindRoomTool; PARTNR's "ReAct-Tools") and Wait
  are answered inside the planner from the world description (:class:`WorldIndex`): they cost an LLM call but
  no round of the simulator. FindAgentActionTool (the partner's actions) exists for a planner with a partner
  only (:class:`homiebot.multiagent.react_pair.PartnerReAct`). PARTNR answers the Find tools with a second LLM over the world graph's lists;
  here a word match over the same lists answers them (deterministic, no second model on a 2-core CPU).
* **Limits** (PARTNR A.9): at most ``max_llm_calls`` calls per episode (PARTNR: 50 for a decentralized
  agent), after which the planner answers End; at most ``max_calls_per_round`` calls within one round
  (perception / Wait calls before an acting one; the last call of a round may only act).
* **Grammar** (PARTNR A.9.2, after Geng et al. 2023): each call's answer is constrained by a grammar built
  for that call (:func:`tool_grammar`): the tools this deployment's actions allow, with object, furniture
  and room arguments restricted to the entities in the agent's current world description. The grammar goes
  to the text engine's xgrammar / llama.cpp GBNF sampler, as the EMMOE answer grammar of
  :mod:`homiebot.planner.constrained` does.
* **Records**: every LLM call of a round is reported in the request's ``model_calls`` (the whole chat it sent and
  the answer cut after ``Assigned!``), so the episode record holds what the model saw; a round answered without a
  call (the rest of a Rearrange, the call limit's End) reports none.
* **Malformed answers** (possible only unconstrained, or when a name is left out of the grammar): the
  planner answers the model ``Result: <what was wrong>`` and asks again within the round's call budget;
  when the budget is spent, the round's answer is the model's raw text, which the loop records as an F1
  format error. Nothing raises.

The world description is the perception world graph's (``--perception ... --describe-world``) when the
request carries one, else the scene as the episode began (:func:`homiebot.planner.text_planning.describe_scene`).
In the second case the planner keeps it current itself with PARTNR's deterministic updates (A.7.1: a
successful pick makes the object held, a successful place puts it on the furniture, open/close change the
furniture's state).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.hf_backend import Generation
from homiebot.planner.messages import ChatMessage, report_call
from homiebot.planner.prompt import format_output
from homiebot.planner.text_planning import describe_scene
from homiebot.types import Action, ErrorCode, Subtask

log = logging.getLogger(__name__)

#: PARTNR A.9: "All decentralized baselines had a maximum timeout of 50 replanning calls".
PARTNR_MAX_LLM_CALLS = 50
#: Calls within one round before the planner must act (ours: PARTNR replans only after an action's result;
#: its perception tools return at once, so a bound per round keeps a model that only queries from stalling).
DEFAULT_MAX_CALLS_PER_ROUND = 4
#: Characters of the thought (PARTNR's free text is unbounded; a cap keeps a CPU call near a few seconds and
#: lets every constrained answer end within the token budget: each token covers at least one byte).
DEFAULT_THOUGHT_MAX_CHARS = 160
#: Characters of a free-text perception query.
QUERY_MAX_CHARS = 60
STOP_WORD = "Assigned!"

# EMMOE table E2's models per action, as the experts choose them (homiebot.planner.expert).
_NAV_MODEL, _OBJECT_NAV_MODEL, _ARTICULATION_MODEL, _GRASP_MODEL = "NoMaD", "PixNav", "octo", "RT-1-X"
#: Characters that would break the ``Tool[a, b]`` call syntax inside a name.
_FORBIDDEN = frozenset(',[]\n\r"\\')


class Arg(str, Enum):
    """Argument types of PARTNR's tool grammar (spec: ``nav_target``, ``object``, ...)."""

    NAV_TARGET = "nav_target"
    OBJECT = "object"
    FURNITURE = "furniture"
    ROOM = "room"
    OBJ_OR_FURNITURE = "obj_or_furniture"
    PLACEMENT = "placement"  # object, spatial_relation, furniture, constraint, reference
    QUERY = "query"  # free text


@dataclass(frozen=True)
class Tool:
    name: str
    arg: Arg | None
    description: str  # our own wording of what the tool does (PARTNR A.9.1 lists the tools)
    action: Action | None = None  # the EMMOE action it becomes; None: answered inside the planner
    needs: tuple[Action, ...] = ()  # deployment actions the tool requires


TOOLS: tuple[Tool, ...] = (
    Tool(
        "Navigate",
        Arg.NAV_TARGET,
        "walk to a room, a piece of furniture or an object, named exactly as in the "
        "description. Example: Navigate[table_1]",
        Action.GO_TO,
        (Action.GO_TO,),
    ),
    Tool(
        "Pick",
        Arg.OBJECT,
        "pick up an object you are next to; the hand holds one object at a time. Example: Pick[cup_1]",
        Action.PICK,
        (Action.PICK,),
    ),
    Tool(
        "Place",
        Arg.PLACEMENT,
        "put the held object on or within a piece of furniture you are next to. "
        "Form: Place[object, on|within, furniture, None, None]; instead of None, None you may write "
        "next_to, reference. Example: Place[cup_1, on, table_1, None, None]",
        Action.PUT,
        (Action.PUT,),
    ),
    Tool(
        "Rearrange",
        Arg.PLACEMENT,
        "fetch an object and place it on or within a piece of furniture in one "
        "call (walks to it, picks it, walks to the furniture, places it). Same form as Place.",
        None,
        (Action.GO_TO, Action.PICK, Action.PUT),
    ),
    Tool(
        "Open",
        Arg.FURNITURE,
        "open a closed piece of furniture (a drawer, a fridge, a cabinet) you are next "
        "to, with an empty hand. Example: Open[fridge_1]",
        Action.OPEN,
        (Action.OPEN,),
    ),
    Tool(
        "Close",
        Arg.FURNITURE,
        "close an open piece of furniture you are next to, with an empty hand. Example: Close[fridge_1]",
        Action.CLOSE,
        (Action.CLOSE,),
    ),
    Tool(
        "PowerOn",
        Arg.OBJ_OR_FURNITURE,
        "switch on an appliance or a lamp you are next to. Example: PowerOn[lamp_1]",
        Action.TURN_ON,
        (Action.TURN_ON,),
    ),
    Tool(
        "PowerOff",
        Arg.OBJ_OR_FURNITURE,
        "switch off an appliance or a lamp you are next to. Example: PowerOff[lamp_1]",
        Action.TURN_OFF,
        (Action.TURN_OFF,),
    ),
    Tool(
        "Clean",
        Arg.OBJECT,
        "clean the held object at the sink you navigated to last. Example: Clean[plate_1]",
        Action.CLEAN,
        (Action.CLEAN,),
    ),
    Tool(
        "Fill",
        Arg.OBJECT,
        "fill the held container (a cup, a mug, a bowl) with water at the sink you navigated to last. "
        "Example: Fill[cup_1]",
        Action.FILL,
        (Action.FILL,),
    ),
    Tool(
        "Pour",
        Arg.OBJECT,
        "pour the water of the held container into another container you are next to. Example: Pour[bowl_1]",
        Action.POUR,
        (Action.POUR,),
    ),
    Tool(
        "FindObjectTool",
        Arg.QUERY,
        "list the exact names of objects that fit a short description, "
        "optionally where they are. Example: FindObjectTool[apples in the kitchen]",
    ),
    Tool(
        "FindReceptacleTool",
        Arg.QUERY,
        "list the exact names of furniture that fit a short description. "
        "Example: FindReceptacleTool[a kitchen counter]",
    ),
    Tool(
        "FindRoomTool",
        Arg.QUERY,
        "list the exact names of rooms that fit a short description. Example: FindRoomTool[a room to sleep in]",
    ),
    # PARTNR's FindAgentActionTool ("a summary of the other agent's actions"): offered only to a planner that has a
    # partner (:attr:`ReActPlanner.partner_tools`), answered from what the loop reported of the partner's rounds.
    Tool(
        "FindAgentActionTool",
        None,
        "tell what the other agent has done so far and what it did last. Example: FindAgentActionTool[]",
    ),
    Tool("Wait", None, "stay idle for a moment. Example: Wait[]"),
    Tool("Done", None, "say that the whole task is finished. Example: Done[]", Action.END),
)
TOOLS_BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
PERCEPTION_TOOLS: tuple[str, ...] = ("FindObjectTool", "FindReceptacleTool", "FindRoomTool", "FindAgentActionTool")
#: The perception tool about the partner (two-agent episodes only).
AGENT_TOOL = "FindAgentActionTool"

# ----------------------------------------------------------------------------------------- the world index

_STATE_SUFFIX = re.compile(r"\s*\((open|closed)\)\s*$")
_STOP = frozenset(
    "a an the on in of to and or all any some which where is are that this it might have has with for from "
    "find name names object objects receptacle receptacles furniture room rooms house something thing things "
    "me my i you can be there".split()
)


def _words(text: str) -> set[str]:
    """Lower-case content words of a name or a query (``kitchen_counter_2`` -> {kitchen, counter}), plurals
    folded (``apples`` -> ``apple``)."""
    out = set()
    for word in re.split(r"[^a-z]+", text.lower()):
        if len(word) < 2 or word in _STOP:
            continue
        plural = len(word) > 3 and word.endswith("s") and not word.endswith("ss")
        out.add(word[:-1] if plural else word)
    return out


@dataclass
class WorldIndex:
    """The rooms, furniture and objects of a world description in PARTNR's layout (``Furniture:`` lines per
    room, then ``Objects:`` lines ``name: where``): the entities a tool call may name, and what the
    perception tools answer from."""

    rooms: list[str] = field(default_factory=list)
    furniture: dict[str, str] = field(default_factory=dict)  # name -> room
    open_state: dict[str, bool] = field(default_factory=dict)  # articulated furniture -> open
    objects: dict[str, str] = field(default_factory=dict)  # name -> where (free text after "name: ")

    @classmethod
    def parse(cls, text: str) -> WorldIndex:
        index = cls()
        section = ""
        for raw in text.splitlines():
            line = raw.strip()
            if not line:
                continue
            if line in ("Furniture:", "Objects:"):
                section = line[:-1]
                continue
            if ":" not in line:
                continue  # "No objects", "No objects found yet", faucet lines without a colon
            head, _, rest = line.partition(":")
            head, rest = head.strip(), rest.strip()
            if section == "Furniture":
                if head.startswith("The following"):
                    continue
                room = "" if head == "unknown room" else head
                if room and room not in index.rooms:
                    index.rooms.append(room)
                for item in (i.strip() for i in rest.split(",")):
                    if not item or item == "(none)":
                        continue
                    match = _STATE_SUFFIX.search(item)
                    name = item[: match.start()].strip() if match else item
                    index.furniture[name] = room
                    if match:
                        index.open_state[name] = match.group(1) == "open"
            elif section == "Objects":
                index.objects[head] = rest
        return index

    def held_by(self, where: str) -> str | None:
        """The object whose place reads ``where`` (``held by the agent``), if any."""
        return next((name for name, text in sorted(self.objects.items()) if text == where), None)

    def objects_text(self) -> str:
        """PARTNR's ``Objects:`` observation list."""
        if not self.objects:
            return "No objects found yet"
        return "\n".join(f"{name}: {where}" for name, where in sorted(self.objects.items()))

    def names(self, arg: Arg) -> list[str]:
        furniture = sorted(self.furniture)
        objects = sorted(self.objects)
        lists = {
            Arg.OBJECT: objects,
            Arg.FURNITURE: furniture,
            Arg.ROOM: list(self.rooms),
            Arg.OBJ_OR_FURNITURE: furniture + objects,
            Arg.NAV_TARGET: list(self.rooms) + furniture + objects,
            Arg.PLACEMENT: objects,
        }
        return [n for n in lists.get(arg, []) if n and not set(n) & _FORBIDDEN]

    # PARTNR A.7.1's deterministic updates after a successful action (used when no perception refreshes it).
    def apply(self, subtask: Subtask) -> None:
        action = Action.parse(subtask.action)
        target = subtask.target or ""
        if action is Action.PICK and target in self.objects:
            self.objects[target] = "held by the agent"
        elif action is Action.PUT and target and subtask.place:
            room = self.furniture.get(subtask.place, "")
            self.objects[target] = f"{subtask.place} in {room}" if room else subtask.place
        elif action in (Action.OPEN, Action.CLOSE) and target in self.furniture:
            self.open_state[target] = action is Action.OPEN

    # The perception tools: the best word match over the lists (PARTNR asks an LLM to pick from them).
    def find_objects(self, query: str) -> str:
        wanted = _words(query)
        scored = {n: len(wanted & (_words(n) | _words(w))) for n, w in self.objects.items()}
        best = _best(scored)
        if not best:
            return f"No objects matching '{query}' are known."
        return "; ".join(f"{n}: {self.objects[n]}" for n in best)

    def find_receptacles(self, query: str) -> str:
        wanted = _words(query)
        scored = {n: len(wanted & (_words(n) | _words(r))) for n, r in self.furniture.items()}
        best = _best(scored)
        if not best:
            return f"No furniture matching '{query}' is known."
        return ", ".join(f"{n} in {self.furniture[n]}" if self.furniture[n] else n for n in best)

    def find_rooms(self, query: str) -> str:
        wanted = _words(query)
        scored = {}
        for room in self.rooms:
            words = _words(room)
            words.update(w for f, r in self.furniture.items() if r == room for w in _words(f))
            scored[room] = len(wanted & words)
        best = _best(scored)
        if not best:
            return f"No room matching '{query}'; the rooms are: {', '.join(self.rooms) or 'unknown'}."
        return ", ".join(best)


def acting_subtask(tool: Tool, args: Sequence[str], last_place: str | None, held: str | None) -> Subtask:
    """The EMMOE subtask of an acting tool call other than Rearrange. Clean and Fill act on the held object at the
    furniture last navigated to; Pour pours the held object into the named one (with nothing known to be held,
    the named one stands for both, so the executor answers the empty hand, L2)."""
    assert tool.action is not None
    if tool.action is Action.END:
        return Subtask("End")
    if tool.action is Action.PUT:
        return Subtask("Put", args[0], args[2])
    if tool.action in (Action.CLEAN, Action.FILL):
        return Subtask(tool.action.value, args[0], last_place)
    if tool.action is Action.POUR:
        return Subtask("Pour", held or args[0], args[0])
    return Subtask(tool.action.value, args[0])


def _best(scores: dict[str, int], limit: int = 8) -> list[str]:
    top = max(scores.values(), default=0)
    if top == 0:
        return []
    return sorted(n for n, s in scores.items() if s == top)[:limit]


# ----------------------------------------------------------------------------------------------- grammar


def _rule(arg: Arg) -> str:
    """The grammar rule's name: llama.cpp's GBNF allows letters, digits and '-' only (no '_')."""
    return arg.value.replace("_", "-")


def literal(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


@dataclass(frozen=True)
class CallRules:
    """The tool-call alternatives of a grammar and the argument rules they use (shared by several agents'
    calls in a centralized grammar, :mod:`homiebot.multiagent.centralized`)."""

    calls: tuple[str, ...]
    rules: dict[str, str]


def call_rules(tools: Sequence[Tool], index: WorldIndex) -> CallRules:
    """The calls of ``tools`` on the entities of ``index``. A tool whose argument type has no entity in the
    index is left out (PARTNR omits it too); Wait and Done never are."""
    lists = {arg: index.names(arg) for arg in Arg}
    needed: list[Arg] = []
    calls = []
    for tool in tools:
        if tool.arg is None:
            calls.append(literal(f"{tool.name}[]"))
            continue
        uses = (Arg.OBJECT, Arg.FURNITURE, Arg.OBJ_OR_FURNITURE) if tool.arg is Arg.PLACEMENT else (tool.arg,)
        if any(arg is not Arg.QUERY and not lists[arg] for arg in uses):
            continue
        needed.extend(a for a in (tool.arg, *uses) if a not in needed)
        calls.append(f"{literal(tool.name + '[')} {_rule(tool.arg)} {literal(']')}")
    rules: dict[str, str] = {}
    for arg in needed:
        if arg is Arg.QUERY:
            rules[_rule(arg)] = f"[a-zA-Z] [a-zA-Z0-9 _']{{0,{QUERY_MAX_CHARS - 1}}}"
        elif arg is Arg.PLACEMENT:
            rules[_rule(arg)] = (
                'object ", " ("on" | "within") ", " furniture ", " ("None, None" | "next_to, " obj-or-furniture)'
            )
        else:
            rules[_rule(arg)] = " | ".join(literal(n) for n in lists[arg])
    return CallRules(tuple(calls), rules)


def thought_rule(thought_max_chars: int) -> str:
    """Free text without ``[`` (so a tool call cannot hide in it), capped in length."""
    return f"thought ::= [a-zA-Z0-9] [a-zA-Z0-9 ,.:;'!?_-]{{0,{max(thought_max_chars - 1, 0)}}}"


def tool_grammar(tools: Sequence[Tool], index: WorldIndex, thought_max_chars: int) -> str:
    """PARTNR's per-call tool grammar (spec §2.6) in the EBNF dialect xgrammar and llama.cpp's GBNF share:
    ``Thought: <free text>`` then one tool call on a listed entity (:func:`call_rules`), then ``Assigned!``."""
    built = call_rules(tools, index)
    lines = [
        'root ::= "Thought: " thought "\\n" call ' + literal("\n" + STOP_WORD),
        thought_rule(thought_max_chars),
        "call ::= " + " | ".join(f"({c})" for c in built.calls),
    ]
    lines.extend(f"{name} ::= {rule}" for name, rule in built.rules.items())
    return "\n".join(lines)


def grammar_max_bytes(tools: Sequence[Tool], index: WorldIndex, thought_max_chars: int) -> int:
    """The longest answer :func:`tool_grammar` accepts, in UTF-8 bytes (a bound on its tokens)."""
    longest = {arg: max((len(n.encode()) for n in index.names(arg)), default=0) for arg in Arg}
    call = 0
    for tool in tools:
        size = len(tool.name) + 2
        if tool.arg is Arg.QUERY:
            size += QUERY_MAX_CHARS
        elif tool.arg is Arg.PLACEMENT:
            size += longest[Arg.OBJECT] + len(", within, ") + longest[Arg.FURNITURE] + len(", next_to, ")
            size += longest[Arg.OBJ_OR_FURNITURE]
        elif tool.arg is not None:
            size += longest[tool.arg]
        call = max(call, size)
    return len("Thought: ") + thought_max_chars + 1 + call + 1 + len(STOP_WORD)


# ------------------------------------------------------------------------------------------------ parsing


@dataclass(frozen=True)
class ToolCall:
    tool: str
    args: tuple[str, ...]
    thought: str


_CALL = re.compile(r"\b(" + "|".join(re.escape(t.name) for t in TOOLS) + r")\[([^\]\n]*)\]")


def parse_tool_call(text: str) -> ToolCall | str:
    """The first tool call of an answer, or what is wrong with it (one line)."""
    thought_match = re.search(r"Thought:\s*(.*)", text)
    thought = thought_match.group(1).strip() if thought_match else ""
    match = _CALL.search(text)
    if match is None:
        return "the answer has no tool call such as Navigate[table_1]"
    args = tuple(a.strip() for a in match.group(2).split(",")) if match.group(2).strip() else ()
    tool = TOOLS_BY_NAME[match.group(1)]
    if tool.arg is None and args:
        return f"{tool.name} takes no argument: write {tool.name}[]"
    if tool.arg is Arg.PLACEMENT and len(args) not in (3, 5):
        return f"{tool.name} needs: object, on|within, furniture, None, None"
    if tool.arg not in (None, Arg.PLACEMENT) and len(args) != 1:
        return f"{tool.name} takes exactly one name"
    return ToolCall(tool.name, args, thought)


# ------------------------------------------------------------------------------------------------ planner


class ChatEngine(Protocol):
    """What the planner needs of a text engine (:class:`homiebot.planner.text_lm.TextLanguageModel`)."""

    def generate(
        self,
        conversations: Sequence[Sequence[ChatMessage]],
        *,
        grammars: Sequence[str | None] | None = None,
        max_new_tokens: int = 512,
    ) -> list[Generation]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TraceStep:
    """One LLM call of the episode: the raw answer, the parsed call (or the error), and what came back."""

    round_index: int
    answer: str
    call: ToolCall | None
    result: str  # the tool's result, "executed" for acting tools, or the format error


SYSTEM_PROMPT = (
    "You control a household robot that carries out tasks in a home: it walks to rooms, furniture and "
    "objects, picks objects up and puts them on or in furniture, and opens and closes furniture. "
    "Each turn you think briefly about the task, the results so far and the list of objects, and then call "
    "exactly one action. Keep to the answer format exactly and learn from earlier results: do not repeat an "
    "action that failed without changing something first. Calling the same action many times in a row "
    "means something went wrong: try another action."
)


def _task_turn(task: str, description: str, tools: Sequence[Tool]) -> str:
    listing = "\n".join(f"- {t.name}: {t.description}" for t in sorted(tools, key=lambda t: t.name) if t.name != "Done")
    return (
        f"Task: {task}\n\n{description.strip()}\n\nActions you can call:\n{listing}\n"
        f"- Done: {TOOLS_BY_NAME['Done'].description}\n\n"
        "Which action brings the task forward next? Answer in exactly this form:\n\n"
        "Thought: <why this action is the next one>\n<one action call>\nAssigned!\n\n"
        "For example:\nThought: The cup is on the table, so I walk to the table first\nNavigate[table_1]\nAssigned!"
    )


@dataclass
class _Episode:
    turns: list[ChatMessage] = field(default_factory=list)
    index: WorldIndex | None = None
    index_from_perception: bool = False
    llm_calls: int = 0
    queue: list[Subtask] = field(default_factory=list)  # the rest of a Rearrange
    last_subtask: Subtask | None = None
    last_place: str | None = None  # the furniture last navigated to (Clean's place)
    pending_result: bool = False  # an acting tool call awaits its result
    trace: list[TraceStep] = field(default_factory=list)


class ReActPlanner(Planner):
    """PARTNR's ReAct tool planner on a bundled text model (module docstring; docs/react.md).

    ``model``: a bundled model name (``smollm2``); ``engine``: an engine to use instead (tests, a shared
    one). ``constrained``: the per-call tool grammar (on by default, as in PARTNR). ``perception_tools``:
    offer the Find tools (PARTNR's ReAct-Tools) or not (its plain ReAct). ``trace_log``: a JSON-lines file
    that gets one line per LLM call (task, round, call, answer, result): the full ReAct trace, which the
    episode record (EMMOE's answers only) does not hold."""

    name = "react"
    privileged = False
    accepts_free_text = True
    #: Whether the planner has a partner to ask about (FindAgentActionTool); a single agent has none.
    partner_tools = False
    #: The agent this planner plays in a pair ("robot", "human"), written into the trace log; None alone.
    trace_agent: str | None = None

    def __init__(
        self,
        model: str = "smollm2",
        constrained: bool = True,
        perception_tools: bool = True,
        max_llm_calls: int = PARTNR_MAX_LLM_CALLS,
        max_calls_per_round: int = DEFAULT_MAX_CALLS_PER_ROUND,
        thought_max_chars: int = DEFAULT_THOUGHT_MAX_CHARS,
        runtime: str = "auto",
        torch_threads: int | None = None,
        engine: ChatEngine | None = None,
        trace_log: str | None = None,
    ) -> None:
        self.trace_log = Path(trace_log) if trace_log else None
        if self.trace_log is not None and not self.trace_log.parent.is_dir():
            raise ValueError(f"trace_log: folder {str(self.trace_log.parent)!r} does not exist")
        if max_llm_calls < 1 or max_calls_per_round < 1 or thought_max_chars < 1:
            raise ValueError("max_llm_calls, max_calls_per_round and thought_max_chars must be >= 1")
        self.constrained = constrained
        self.perception_tools = perception_tools
        self.max_llm_calls = max_llm_calls
        self.max_calls_per_round = max_calls_per_round
        self.thought_max_chars = thought_max_chars
        if engine is None:
            from homiebot.planner.models import bundled_model
            from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

            bundled = bundled_model(model)
            if bundled is None:
                raise ValueError(f"model {model!r} is not a bundled text model; the react planner runs smollm2")
            if runtime not in ("auto", "llama_cpp", "transformers"):
                raise ValueError(f"unknown runtime {runtime!r}; choose auto, llama_cpp or transformers")
            engine = TextLanguageModel(TextModelConfig(bundled, runtime=runtime, threads=torch_threads))  # type: ignore[arg-type]
        self.engine: ChatEngine = engine
        self._episode = _Episode()
        self._task_id = ""

    # ---------------------------------------------------------------------------------------- episode

    def reset(self, task: str, seed: int = 0) -> None:
        self._episode = _Episode()
        self._task_id = task

    @property
    def trace(self) -> list[TraceStep]:
        """This episode's LLM calls (for tests and records)."""
        return list(self._episode.trace)

    @property
    def llm_calls(self) -> int:
        return self._episode.llm_calls

    def close(self) -> None:
        self.engine.close()

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        if len(requests) > 1:
            raise ValueError(f"the react planner plans one episode at a time; got a batch of {len(requests)}")
        return [self.plan(r) for r in requests]

    def tools_for(self, request: PlanRequest) -> list[Tool]:
        """The tools this deployment's action list allows (PARTNR gives the robot no state-changing tools;
        here the action list decides: the household actions bring PowerOn/PowerOff and Clean)."""
        actions = (
            {Action.parse(a) for a in request.actions}
            if request.actions
            else {Action.GO_TO, Action.PICK, Action.PUT, Action.OPEN, Action.CLOSE, Action.END}
        )
        tools = []
        for tool in TOOLS:
            if tool.name in PERCEPTION_TOOLS and not self.perception_tools:
                continue
            if tool.name == AGENT_TOOL and not self.partner_tools:
                continue
            if all(a in actions for a in tool.needs):
                tools.append(tool)
        return tools

    # ------------------------------------------------------------------------------------------- round

    def plan(self, request: PlanRequest) -> str:
        ep = self._episode
        if request.round_index <= 1 or not ep.turns:
            self._episode = ep = _Episode()
        self._refresh_index(request)
        assert ep.index is not None
        outcome_ok = request.last_error is ErrorCode.OK
        if ep.last_subtask is not None and outcome_ok and not ep.index_from_perception:
            ep.index.apply(ep.last_subtask)
        if ep.queue:  # the rest of a Rearrange, while its steps succeed
            if outcome_ok:
                return self._answer(ep.queue.pop(0), "Rearrange continues", request)
            ep.queue.clear()
        if not ep.turns:
            ep.turns = [
                ChatMessage("system", SYSTEM_PROMPT),
            ]
            first_user = _task_turn(request.task, self._description(request), self.tools_for(request))
            ep.turns.append(ChatMessage("user", first_user))
        elif ep.pending_result:
            ep.turns.append(ChatMessage("user", self._result_turn(request)))
        ep.pending_result = False
        tools = self.tools_for(request)
        for call_in_round in range(self.max_calls_per_round):
            if ep.llm_calls >= self.max_llm_calls:
                log.info("react: the episode's %d LLM calls are spent; answering End", self.max_llm_calls)
                return self._answer(
                    Subtask("End"), f"the limit of {self.max_llm_calls} planner calls is reached", request
                )
            last_call = call_in_round == self.max_calls_per_round - 1
            allowed = [t for t in tools if t.action is not None or t.name == "Rearrange"] if last_call else tools
            answer = self._generate(allowed, ep.index)
            report_call(request, ep.turns, answer)  # the turns as this call sent them (the answer joins them next)
            ep.turns.append(ChatMessage("assistant", answer))
            parsed = parse_tool_call(answer)
            error: str | None
            if isinstance(parsed, str):
                error = parsed
            elif parsed.tool not in {t.name for t in allowed}:
                error = f"{parsed.tool} cannot be called now; call one of: {', '.join(t.name for t in allowed)}"
            else:
                error = self._check_names(parsed, ep.index)
            if error is not None:
                self._log_step(TraceStep(request.round_index, answer, None, error))
                if last_call:
                    # Defined fallback: the raw answer goes to the loop, whose parser answers it with F1.
                    return answer
                ep.turns.append(ChatMessage("user", f"Result: Invalid action call: {error}."))
                continue
            assert isinstance(parsed, ToolCall)
            tool = TOOLS_BY_NAME[parsed.tool]
            if tool.action is None and tool.name != "Rearrange":
                result = self._answer_inside(parsed, ep.index)
                self._log_step(TraceStep(request.round_index, answer, parsed, result))
                ep.turns.append(ChatMessage("user", f"Result: {result}"))
                continue
            self._log_step(TraceStep(request.round_index, answer, parsed, "executed"))
            ep.pending_result = True
            steps = self._subtasks(parsed, ep.index)
            ep.queue = steps[1:]
            return self._answer(steps[0], parsed.thought, request, call=parsed)
        raise AssertionError("unreachable: the last call of a round returns")  # pragma: no cover

    # --------------------------------------------------------------------------------------- helpers

    def _description(self, request: PlanRequest) -> str:
        if request.world_description:
            return request.world_description
        if request.scene is not None:
            return describe_scene(request.scene).text
        return "Furniture:\nObjects:\nNo objects found yet"

    def _refresh_index(self, request: PlanRequest) -> None:
        ep = self._episode
        if request.world_description:
            ep.index = WorldIndex.parse(request.world_description)
            ep.index_from_perception = True
        elif ep.index is None:
            ep.index = WorldIndex.parse(self._description(request))

    def _result_turn(self, request: PlanRequest) -> str:
        assert self._episode.index is not None
        if request.last_error is ErrorCode.OK:
            result = "Successful execution!"
        else:
            result = f"Failed! {request.feedback}"
        return f"Result: {result}\nObjects:\n{self._episode.index.objects_text()}"

    def _generate(self, tools: Sequence[Tool], index: WorldIndex) -> str:
        ep = self._episode
        ep.llm_calls += 1
        grammar = tool_grammar(tools, index, self.thought_max_chars) if self.constrained else None
        budget = grammar_max_bytes(tools, index, self.thought_max_chars)
        generation = self.engine.generate([list(ep.turns)], grammars=[grammar], max_new_tokens=budget)[0]
        text = generation.text
        cut = text.find(STOP_WORD)
        return text[: cut + len(STOP_WORD)] if cut >= 0 else text

    def _log_step(self, step: TraceStep) -> None:
        ep = self._episode
        ep.trace.append(step)
        if self.trace_log is None:
            return
        entry = {
            "task": self._task_id,
            **({"agent": self.trace_agent} if self.trace_agent else {}),
            "round": step.round_index,
            "call": ep.llm_calls,
            "answer": step.answer,
            "tool": step.call.tool if step.call else None,
            "args": list(step.call.args) if step.call else None,
            "result": step.result,
        }
        with self.trace_log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    @staticmethod
    def _check_names(call: ToolCall, index: WorldIndex) -> str | None:
        tool = TOOLS_BY_NAME[call.tool]
        if tool.arg in (None, Arg.QUERY):
            return None
        if tool.arg is Arg.PLACEMENT:
            obj, relation, furniture = call.args[:3]
            if obj not in index.names(Arg.OBJECT):
                return f"no object called {obj!r} is known"
            if relation not in ("on", "within"):
                return f"the relation must be on or within, not {relation!r}"
            if furniture not in index.names(Arg.FURNITURE):
                return f"no furniture called {furniture!r} is known"
            return None
        assert tool.arg is not None
        if call.args[0] not in index.names(tool.arg):
            return f"no {tool.arg.value.replace('_', ' ')} called {call.args[0]!r} is known"
        return None

    @staticmethod
    def _answer_inside(call: ToolCall, index: WorldIndex) -> str:
        query = call.args[0] if call.args else ""
        if call.tool == "FindObjectTool":
            return index.find_objects(query)
        if call.tool == "FindReceptacleTool":
            return index.find_receptacles(query)
        if call.tool == "FindRoomTool":
            return index.find_rooms(query)
        return "Waited; nothing else happened."  # Wait: no partner to wait for in a single-agent episode

    def _subtasks(self, call: ToolCall, index: WorldIndex) -> list[Subtask]:
        tool = TOOLS_BY_NAME[call.tool]
        if tool.name == "Rearrange":
            obj, furniture = call.args[0], call.args[2]
            held = index.objects.get(obj, "").startswith("held by the agent")
            steps = [] if held else [Subtask("Go to", obj), Subtask("Pick", obj)]
            return [*steps, Subtask("Go to", furniture), Subtask("Put", obj, furniture)]
        return [acting_subtask(tool, call.args, self._episode.last_place, index.held_by("held by the agent"))]

    def _answer(self, subtask: Subtask, thought: str, request: PlanRequest, call: ToolCall | None = None) -> str:
        ep = self._episode
        ep.last_subtask = subtask
        assert ep.index is not None
        action = Action.parse(subtask.action)
        if action is Action.GO_TO and subtask.target in ep.index.furniture:
            ep.last_place = subtask.target
        model = self._model_for(action, subtask.target, ep.index, request.models)
        said = f"{call.tool}[{', '.join(call.args)}]" if call is not None else subtask.text()
        analysis = f"{thought.strip() or 'No thought'} (ReAct call {ep.llm_calls}: {said})"
        return format_output(analysis, subtask, model)

    @staticmethod
    def _model_for(action: Action | None, target: str | None, index: WorldIndex, models: Sequence[str]) -> str:
        if action is Action.GO_TO:
            model = _OBJECT_NAV_MODEL if target in index.objects else _NAV_MODEL
        elif action in (Action.OPEN, Action.CLOSE, Action.TURN_ON, Action.TURN_OFF):
            model = _ARTICULATION_MODEL
        else:
            model = _GRASP_MODEL
        if models and model not in models:
            return models[0]
        return model
