"""Text planning mode: EMMOE's appendix-D prompt for a text-only model, with a world description for eyes.

A text-only model (``--planner hf --model smollm2``) cannot see the four views, so the observation part of
the appendix-D system information names a text world description instead, and the user turns carry that
description. Everything else is appendix D's: the task, the inventory, the historical execution and the feedback
of its instruction (:func:`homiebot.planner.prompt.build_instruction`, built by the loop), in another order
(below), answered in the same ``Analysis / Subtask / Model`` format, parsed, executed and fed back exactly as for
a vision-language model.

Where the description comes from:

* the perception world graph's description (``PlanRequest.world_description``: ``--perception
  privileged|conceptgraph --describe-world``), in PARTNR's format (PARTNR appendix A.16);
* otherwise the world as it is now (:func:`describe_world`, from the request's world state, which the hf
  planner reads in this mode as PARTNR's oracle perception gives its planners the state): every room with
  its furniture (open or closed) and what lies on or in each piece now, where the robot is, and which names
  are within its reach by the rule the expert planner decides ``[Go to, X]`` against acting on X
  (:mod:`homiebot.planner.reach`). An image-based planner sees all of this in its four views; a text-only
  model has no other way to know it, and without it the expert's next subtask is not determined by the
  prompt (the same prompt would need ``[Go to, apple]`` in one episode and ``[Pick, apple]`` in another);
* without a state, the scene's rooms, furniture and objects as they were when the episode began
  (:func:`describe_scene`; the scene spec every planner receives).

One class builds a round's chat (:class:`TextTranscript`): the hf planner sends its growing chat by default and,
with ``include_history=False``, a fresh chat per round (:func:`fresh_text_chat`); ``homie data collect`` keeps
the fresh chat beside each round of an expert's episode, built by the same function, so that the training
samples are the prompts the planner sends.

Decision: **what stays the same within an episode comes first, what changes comes last.** Appendix D's
instruction reads ``Task, Inventory, Historical Execution, Feedback`` and the world description (the views, for a
VLM) comes before it. Here a user turn reads::

    Task: <the task>
    World at the start:
    <describe_world's room lines of the episode's first round>
    Historical Execution: <the history>
    Changed since the start: <each piece of furniture (or a room's floor) whose line differs now, as it is now>
    Robot: in <room>; within reach: <names>
    Inventory: <the inventory now>
    Feedback: <the last round's feedback>
    Now based on the instruction above, please output Analysis, Subtask and Model in mentioned format.

Why: llama.cpp (and the transformers runtime) reuse the key/value cache of the longest token prefix a round's
prompt shares with the previous one (:mod:`homiebot.planner.text_lm`). The world as it is now changes after
nearly every round (the robot's room and reach after a Go to, a furniture line after a Pick, Put, Open or Close),
and with it first everything after it was computed again: a median of 186 new tokens per fresh-chat round over 150
training episodes, 106 in this order, for 33 more tokens in the whole prompt (benchmarks/bench_prompt_prefix.py,
BENCHMARKS.md). Now the task, the world at the start and the history only grow within an episode (the history at
its end), and what changes is a few short lines at the end. No information is lost: the world now is the start with the
changed pieces replaced, each written whole as it is now (``[empty]`` when nothing is on or in it any more).
The Inventory moves after the history, since it changes with every Pick and Put. A description that is not
:func:`describe_world`'s (perception's world graph, the scene as it began) is kept whole after the task.

Decision: **the conversation grows at its end.** Appendix D keeps a window of the last three rounds, which
shifts every round, so a model's key/value cache of the earlier prompt would be useless. Here the episode is
one growing chat by default: the system turn, then for each round the user turn and the model's answer. Each
round then costs only its new tokens and the answer (:mod:`homiebot.planner.text_lm`).

Decision: **each later user turn of the growing chat carries only what changed.** Appendix D's instruction repeats
the task and the whole historical execution every round; in a chat that keeps every earlier turn, that
repetition is already in the context, and on a CPU it was most of a late round's new tokens (100-250 of them).
So the first user turn is the whole turn above, and each later one keeps the same order without the task and the
world at the start, with only the history items added since the last turn, and the two world lines only when the
world changed since the last turn (:func:`delta_instruction` for the turn without them)::

    Historical Execution: <only the items added since the last turn, e.g. "(4) Go to, fridge(success)">
    Changed since the start: <as above>
    Robot: in kitchen; within reach: <names>
    Inventory: <the inventory now>
    Feedback: <the last round's feedback>
    Now based on the instruction above, please output Analysis, Subtask and Model in mentioned format.

The model still sees everything appendix D's window would show, and more: the task and the world at the start in
the first turn, every earlier history item in the turn that added it, and every earlier answer. An instruction
that is not in appendix D's form is sent whole after the whole world description; one whose history does not
extend the last one sent (a planner wrapper that rewrote it) is sent with its task and whole history.

Decision: **the compact turn** (``compact_turns``, a planner option; :func:`compact_turn`). On one CPU core a
round's cost is its new tokens: about 100 in the later turn above, most of them what the chat already holds (a
history item that repeats the answer just above it, every piece changed since the start again, the closing
instruction). The compact form sends a later turn as::

    Changed: <the pieces whose line changed since the previous turn, as they are now; only when any did>
    Robot: in kitchen; within reach: <names; only when this line changed>
    Inventory: <the inventory now>
    Feedback: <the last round's feedback>

with the history line again when a round did not add exactly one item. The first turn is the whole turn above.
Nothing is lost: the world now is the start with every later ``Changed:`` piece replaced in order, the robot line
is the last one sent, and each answer's result is the feedback after it. A model must be trained on this form
(``homie data build sft --episodes --compact-turns``): it is not the default, and the shipped model's name sets it
when that model was trained on it (:data:`homiebot.config.planners.SHIPPED_MODEL_OPTIONS`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from homiebot.config import AnswerFormat
from homiebot.planner.base import PlanRequest
from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import INSTRUCTION_SUFFIX, parse_output
from homiebot.planner.reach import ReachRule
from homiebot.sim.scene import SceneSpec
from homiebot.types import EntityKind, Subtask, WorldState

log = logging.getLogger(__name__)

#: Appendix D's first item, for a model that reads instead of sees.
_IMAGES_ITEM_PREFIX = "(1) Observation images:"
TEXT_OBSERVATION_ITEM = (
    "(1) World description: a text list of the rooms with their furniture, the objects and where they are, "
    "where you are and what is within your reach. Name places and objects exactly as they are written there."
)


def text_system_prompt(system_prompt: str) -> str:
    """The appendix-D system information with its observation-images item replaced by the world description."""
    lines = system_prompt.split("\n")
    for index, line in enumerate(lines):
        if line.startswith(_IMAGES_ITEM_PREFIX):
            lines[index] = TEXT_OBSERVATION_ITEM
            return "\n".join(lines)
    log.warning("the system prompt has no observation-images item; the world description item is appended")
    return system_prompt.rstrip("\n") + "\n" + TEXT_OBSERVATION_ITEM


#: Appendix D's instruction (:func:`homiebot.planner.prompt.build_instruction`), field by field.
_INSTRUCTION = re.compile(
    r"Task: (?P<task>[^\n]*)\nInventory: (?P<inventory>[^\n]*)\nHistorical Execution: (?P<history>[^\n]*)\n"
    r"Feedback: (?P<feedback>.*)\n" + re.escape(INSTRUCTION_SUFFIX) + r"\Z",
    re.DOTALL,
)


@dataclass(frozen=True)
class InstructionFields:
    """An appendix-D instruction taken apart (:func:`parse_instruction`)."""

    task: str
    inventory: str
    history: str  # "None" before the first round's result
    feedback: str


def parse_instruction(text: str) -> InstructionFields | None:
    """The fields of an appendix-D instruction, or None when ``text`` is not one."""
    match = _INSTRUCTION.fullmatch(text)
    if match is None:
        return None
    return InstructionFields(match["task"], match["inventory"], match["history"], match["feedback"])


def delta_instruction(fields: InstructionFields, previous_history: str) -> str | None:
    """A later round's user turn of the growing chat without world lines (module docstring): the history items
    after ``previous_history``, then the inventory and feedback. None when the history does not extend it."""
    new = _new_history(fields.history, previous_history)
    return None if new is None else _compose(fields, task=False, history=new)


def _new_history(history: str, previous_history: str) -> str | None:
    """The history items after ``previous_history`` ("None" when none), or None when it does not extend it."""
    before = "" if previous_history == "None" else previous_history
    if not history.startswith(before):
        return None
    return history[len(before) :].strip() or "None"


def _compose(
    fields: InstructionFields,
    *,
    task: bool,
    history: str,
    world_start: Sequence[str] = (),
    world_now: Sequence[str] = (),
) -> str:
    """A user turn in the order of the module docstring. Not appendix D's (task, inventory, history, feedback
    after the observation): what stays the same within an episode first and what changes last, so that the
    runtimes' prefix reuse keeps all but the last lines of the previous round's prompt."""
    lines = [f"Task: {fields.task}"] if task else []
    lines += [*world_start, f"Historical Execution: {history}", *world_now]
    lines += [f"Inventory: {fields.inventory}", f"Feedback: {fields.feedback}", INSTRUCTION_SUFFIX]
    return "\n".join(lines)


@dataclass(frozen=True)
class SceneDescription:
    """A scene's text world description and the names it lists (what a constrained answer may name)."""

    text: str
    names: tuple[str, ...]


def describe_scene(scene: SceneSpec) -> SceneDescription:
    """The scene spec (:class:`homiebot.sim.scene.SceneSpec`) as a world description, in the format of the
    perception world graph's (``Furniture:`` lines per room, then ``Objects:`` with where each one is)."""
    from homiebot.sim.mujoco.geometry import room_of_point

    rooms = list(scene.rooms)
    by_room: dict[str, list[str]] = {room.name: [] for room in rooms}
    unroomed: list[str] = []
    for furniture in scene.furniture:
        room = furniture.room or room_of_point(rooms, furniture.pose.x, furniture.pose.y)
        label = furniture.name
        if furniture.articulation is not None and furniture.interactive:
            label += f" ({'open' if furniture.articulation.open else 'closed'})"
        (by_room[room] if room in by_room else unroomed).append(label)
    lines = ["Furniture:"]
    lines.extend(f"{name}: " + (", ".join(sorted(items)) or "(none)") for name, items in by_room.items())
    if unroomed:
        lines.append("unknown room: " + ", ".join(sorted(unroomed)))
    lines.append("Objects:")
    for obj in sorted(scene.objects, key=lambda o: o.name):
        if obj.parent is not None:
            where = f"{obj.relation} {obj.parent}"
        else:
            room = room_of_point(rooms, obj.position[0], obj.position[1]) if obj.position is not None else None
            where = f"on the floor in {room}" if room else "on the floor"
        lines.append(f"{obj.name}: {where}")
    if not scene.objects:
        lines.append("No objects")
    return SceneDescription("\n".join(lines), tuple(scene.all_names()))


#: The heading of :func:`describe_world`'s text; a user turn splits it (module docstring).
WORLD_HEADING = "World now:"
WORLD_START_HEADING = "World at the start:"
CHANGED_PREFIX = "Changed since the start: "
ROBOT_PREFIX = "Robot: "
#: The heading of a description that is not describe_world's (perception's, the scene's), in the first turn and
#: again in a later turn of the growing chat when it changed.
DESCRIPTION_HEADING = "World description:"
DESCRIPTION_UPDATED_HEADING = "World description (updated):"


@dataclass(frozen=True)
class WorldLines:
    """:func:`describe_world`'s text taken apart: its room lines and its robot line."""

    rooms: tuple[str, ...]
    robot: str


def split_world(text: str) -> WorldLines | None:
    """The room lines and the robot line of :func:`describe_world`'s text; None for any other description."""
    lines = text.strip().split("\n")
    if len(lines) < 2 or lines[0] != WORLD_HEADING or not lines[-1].startswith(ROBOT_PREFIX):
        return None
    return WorldLines(tuple(lines[1:-1]), lines[-1])


def _top_level_parts(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (a room line's pieces)."""
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [p for p in parts if p]


def _pieces(rooms: Sequence[str]) -> dict[str, str]:
    """Each piece of furniture (by name) and each room's floor (``<room> floor``) with its text in the room lines."""
    pieces: dict[str, str] = {}
    for line in rooms:
        room, _, rest = line.partition(": ")
        if rest == "nothing":
            continue
        for part in _top_level_parts(rest):
            name = part.split(" ", 1)[0]
            if name == "floor":
                pieces[f"{room} floor"] = f"{room} {part}"
            else:
                pieces[name] = part
    return pieces


def changed_pieces(before_rooms: Sequence[str], now_rooms: Sequence[str]) -> list[str]:
    """Every piece (furniture, or a room's floor) whose text differs between the room lines ``before_rooms`` and
    ``now_rooms``, written as it is now, ``[empty]`` added when nothing is on or in it (module docstring)."""
    before, after = _pieces(before_rooms), _pieces(now_rooms)
    changed = []
    for key in [*before, *(k for k in after if k not in before)]:
        if before.get(key) != after.get(key):
            text = after.get(key, key)
            changed.append(text if "[" in text else f"{text} [empty]")
    return changed


def world_changes(start: Sequence[str], now: Sequence[str]) -> str:
    """The line that turns the room lines ``start`` into ``now`` (:func:`changed_pieces`; module docstring)."""
    return CHANGED_PREFIX + (", ".join(changed_pieces(start, now)) or "nothing")


#: A compact turn's world line: the pieces that changed since the previous turn (module docstring).
CHANGED_SINCE_LAST_PREFIX = "Changed: "
#: One item of the historical execution, e.g. ``(4) Go to, fridge(success)``.
_HISTORY_ITEM = re.compile(r"\(\d+\) ")


def compact_turn(
    fields: InstructionFields,
    new_history: str,
    world_before: WorldLines | None,
    world_now: WorldLines | None,
) -> str:
    """A later user turn of the growing chat in the compact form (``compact_turns``; module docstring): what
    changed since the previous turn and nothing the chat already holds.

    * The history line only when the round did not add exactly one item: one item repeats the answer just above
      it, and whether it succeeded is the feedback line's (EMMOE appendix D: ``None`` after a success).
    * ``Changed:`` with the pieces whose text changed since the previous turn's world, when any did.
    * The robot line when it changed.
    * The inventory and the feedback always; the closing instruction only in the first turn.
    """
    lines = []
    if len(_HISTORY_ITEM.findall(new_history)) != 1:
        lines.append(f"Historical Execution: {new_history}")
    if world_before is not None and world_now is not None:
        changed = changed_pieces(world_before.rooms, world_now.rooms)
        if changed:
            lines.append(CHANGED_SINCE_LAST_PREFIX + ", ".join(changed))
        if world_now.robot != world_before.robot:
            lines.append(world_now.robot)
    lines += [f"Inventory: {fields.inventory}", f"Feedback: {fields.feedback}"]
    return "\n".join(lines) + "\n"


def describe_world(state: WorldState, last: Subtask | None, reach: ReachRule | None = None) -> str:
    """The world as it is in ``state``, compactly (module docstring): one line per room with its furniture,
    each piece with ``(open)``/``(closed)`` when it opens and ``[on: ...]``/``[in: ...]`` for what lies on or in
    it now (``[in: ...; on: ...]`` when both; nested for an object in an object), the objects on the floor; then where the robot is and which
    names are within its reach after the subtask ``last`` (:class:`~homiebot.planner.reach.ReachRule`). The
    held object is not placed anywhere: the instruction's Inventory names it."""
    entities = state.entities
    contents: dict[str, dict[str, list[str]]] = {}  # receptacle -> relation ("on", "in") -> objects
    floor: dict[str | None, list[str]] = {}
    for name in sorted(n for n, e in entities.items() if e.kind is EntityKind.OBJECT and not e.held):
        entity = entities[name]
        if entity.parent is not None and entity.parent in entities:
            contents.setdefault(entity.parent, {}).setdefault(entity.relation or "on", []).append(name)
        else:
            floor.setdefault(entity.room, []).append(name)

    def label(name: str) -> str:
        entity = entities[name]
        text = name
        if entity.articulated and entity.interactive and entity.is_open is not None:
            text += " (open)" if entity.is_open else " (closed)"
        held_here = contents.get(name)
        if held_here:
            groups = (f"{relation}: " + ", ".join(label(n) for n in names) for relation, names in sorted(held_here.items()))
            text += " [" + "; ".join(groups) + "]"
        return text

    rooms = [n for n, e in entities.items() if e.kind is EntityKind.ROOM]
    furniture: dict[str | None, list[str]] = {}
    for name in sorted(n for n, e in entities.items() if e.kind is EntityKind.FURNITURE):
        room = entities[name].room
        furniture.setdefault(room if room in rooms else None, []).append(name)
    lines = [WORLD_HEADING]
    for room in [*rooms, None]:
        parts = [label(n) for n in furniture.get(room, ())]
        if floor.get(room):
            parts.append("floor [on: " + ", ".join(label(n) for n in floor[room]) + "]")
        if room is None and not parts:
            continue
        lines.append(f"{room or 'unknown room'}: " + (", ".join(parts) or "nothing"))
    near = (reach or ReachRule()).within_reach(state, last)
    where = f"in {state.robot_room}" if state.robot_room else "in no room"
    lines.append(f"Robot: {where}; within reach: {', '.join(near) or 'nothing'}")
    return "\n".join(lines)


def last_subtask(request: PlanRequest) -> Subtask | None:
    """The subtask answered in the round before ``request`` (None in round 1, or when it did not parse)."""
    if not request.history:
        return None
    # Read with or without an Analysis line: a subtask-only planner's answers say where the robot went as well.
    return parse_output(request.history[-1].answer, AnswerFormat.SUBTASK).subtask


def fresh_text_chat(request: PlanRequest, transcript: TextTranscript) -> list[ChatMessage]:
    """One round as a fresh chat in the text mode: the system turn, then one user turn (module docstring), the
    world at the start being the one ``transcript`` kept from this episode's first round. What the hf planner
    sends with ``include_history=False``, and what ``homie data collect`` keeps for each round of an expert's
    episode (one function for both)."""
    return transcript.fresh_chat(request)


@dataclass
class TextTranscript:
    """One episode's chat for a text-only model (see the module docstring): the growing chat
    (:meth:`conversation`, :meth:`keep`) and the world at the start that both forms of a round's chat need."""

    turns: list[ChatMessage] = field(default_factory=list)
    last_description: str | None = None
    scene_names: tuple[str, ...] = ()
    #: Send later rounds only what changed (module docstring); False sends the task and whole history each turn.
    delta_turns: bool = True
    #: Later rounds in the compact form (:func:`compact_turn`; module docstring); needs ``delta_turns``.
    compact: bool = False
    #: The task and historical execution of the last kept user turn (None: nothing kept yet).
    last_fields: InstructionFields | None = None
    #: The room lines of this episode's first :func:`describe_world` text (None: none seen yet).
    start_rooms: tuple[str, ...] | None = None
    _scene_name: str | None = None
    _scene_text: str | None = None

    def reset(self) -> None:
        self.turns.clear()
        self.last_description = None
        self.last_fields = None
        self.start_rooms = None
        self.scene_names = ()
        self._scene_name = self._scene_text = None

    def fresh_chat(self, request: PlanRequest) -> list[ChatMessage]:
        """This round as a fresh chat: the system turn and one whole user turn (round 1 starts a new episode)."""
        if request.round_index <= 1:
            self.reset()
        system = ChatMessage("system", text_system_prompt(request.system_prompt))
        return [system, ChatMessage("user", self._whole_turn(request, self.world_text(request)))]

    def conversation(self, request: PlanRequest) -> list[ChatMessage]:
        """The chat for this round: the turns so far plus this round's user turn (not yet kept)."""
        if request.round_index <= 1 or not self.turns:
            self.reset()
            self.turns.append(ChatMessage("system", text_system_prompt(request.system_prompt)))
        description = self.world_text(request)
        if self.last_fields is None:
            return [*self.turns, ChatMessage("user", self._whole_turn(request, description))]
        fields = parse_instruction(request.instruction)
        changed = description is not None and description != self.last_description
        if fields is None:
            text = self._unparsed_turn(request.instruction, description if changed else None)
            return [*self.turns, ChatMessage("user", text)]
        world = self._world_now(description) if changed and description is not None else []
        new = _new_history(fields.history, self.last_fields.history)
        if self.delta_turns and fields.task == self.last_fields.task and new is not None:
            compact = self._compact_turn(fields, new, description) if self.compact else None
            text = compact if compact is not None else _compose(fields, task=False, history=new, world_now=world)
        else:
            text = _compose(fields, task=True, history=fields.history, world_now=world)
        return [*self.turns, ChatMessage("user", text)]

    def keep(self, conversation: Sequence[ChatMessage], answer: str, request: PlanRequest) -> None:
        """Keep this round's user turn and the model's answer (the chat grows at its end)."""
        self.turns = [*conversation, ChatMessage("assistant", answer)]
        self.last_description = self.world_text(request)
        self.last_fields = parse_instruction(request.instruction)

    def adopt(self, answer: str) -> None:
        """Put ``answer`` in place of the last kept answer (another answer than the model's was executed)."""
        if not self.turns or self.turns[-1].role != "assistant":
            raise ValueError("no answer kept yet: adopt() follows a round's keep()")
        self.turns[-1] = ChatMessage("assistant", answer)

    def _whole_turn(self, request: PlanRequest, description: str | None) -> str:
        """A user turn with everything: the task, the world (at the start, then the lines that changed), the whole
        history, the inventory and the feedback (module docstring)."""
        fields = parse_instruction(request.instruction)
        if fields is None:
            return self._unparsed_turn(request.instruction, description)
        lines = split_world(description) if description is not None else None
        if lines is not None:
            if self.start_rooms is None:
                self.start_rooms = lines.rooms
            start = [WORLD_START_HEADING, *self.start_rooms]
            now = [world_changes(self.start_rooms, lines.rooms), lines.robot]
            return _compose(fields, task=True, history=fields.history, world_start=start, world_now=now)
        start = [DESCRIPTION_HEADING, description.strip()] if description is not None else []
        return _compose(fields, task=True, history=fields.history, world_start=start)

    def _compact_turn(self, fields: InstructionFields, new_history: str, description: str | None) -> str | None:
        """This round's :func:`compact_turn`; None when the world changed and one of the two descriptions is not
        :func:`describe_world`'s (the caller then sends the other description whole)."""
        if description is None or description == self.last_description:
            return compact_turn(fields, new_history, None, None)  # the world lines only when the world changed
        before = split_world(self.last_description) if self.last_description is not None else None
        now = split_world(description)
        if before is None or now is None:
            return None
        return compact_turn(fields, new_history, before, now)

    def _world_now(self, description: str) -> list[str]:
        """A later turn's world lines: the changes and the robot line, or another description whole."""
        lines = split_world(description)
        if lines is not None and self.start_rooms is not None:
            return [world_changes(self.start_rooms, lines.rooms), lines.robot]
        return [DESCRIPTION_UPDATED_HEADING, description.strip()]

    @staticmethod
    def _unparsed_turn(instruction: str, description: str | None) -> str:
        """An instruction not in appendix D's form: sent whole, after the whole description when there is one."""
        if description is None:
            return instruction
        body = description.strip()
        if split_world(description) is None:
            body = f"{DESCRIPTION_HEADING}\n{body}"
        return f"{body}\n{instruction}"

    def targets(self, request: PlanRequest) -> tuple[str, ...]:
        """The names a constrained answer may use: those of the world description the round's prompt carries.

        * Perception's own description (``world_description``) comes with its grounded names: those alone, since
          they are the names that description uses and that perception's grounder resolves (none grounded yet:
          the names of the scene described earlier, if any).
        * A description this transcript makes (:func:`describe_world` of the state, or the scene as it began)
          names every object, while the grounded names may be fewer: the default
          ``homiebot.agent.knowledge.SegmentationKnowledge`` gives the names the views have shown so far. Allowing
          only those would forbid a name the prompt gives and the model was trained to answer, and force it onto
          the nearest allowed one. So the described names, then any grounded name besides: the union, never fewer
          names than the views alone allowed.
        """
        if request.world_description:
            return tuple(request.grounded_targets) or self.scene_names
        self.world_text(request)
        return tuple(dict.fromkeys([*self.scene_names, *request.grounded_targets]))

    def world_text(self, request: PlanRequest) -> str | None:
        """The round's world description: perception's, else :func:`describe_world` of the state, else the scene's
        as it began."""
        if request.world_description:
            return request.world_description
        scene = request.scene
        state = request.world_state
        if scene is not None and (self._scene_text is None or self._scene_name != scene.name):
            described = describe_scene(scene)  # the scene as the episode began: once per episode
            self._scene_name, self._scene_text, self.scene_names = scene.name, described.text, described.names
        if state is not None:
            if scene is None:
                self.scene_names = tuple(state.entities)
            return describe_world(state, last_subtask(request))
        return self._scene_text
