"""Text planning mode: EMMOE's appendix-D prompt for a text-only model, with a world description for eyes.

A text-only model (``--planner hf --model smollm2``) cannot see the four views, so the observation part of
the appendix-D system information names a text world description instead, and the episode's first user
turn carries that description. Everything else is appendix D's: the task, the inventory, the historical
execution and the feedback in the same instruction text (:func:`homiebot.planner.prompt.build_instruction`,
built by the loop), answered in the same ``Analysis / Subtask / Model`` format, parsed, executed and fed
back exactly as for a vision-language model.

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

One function builds a round's fresh chat (:func:`fresh_text_chat`): the hf planner with
``include_history=False`` sends it, and ``homie data collect`` keeps it beside each round of an expert's
episode, so that the training samples are the prompts the planner sends.

Decision: **the conversation grows at its end.** Appendix D keeps a window of the last three rounds, which
shifts every round, so a model's key/value cache of the earlier prompt would be useless. Here the episode is
one growing chat: the system turn, then for each round the user turn (the world description in the first
round, and again only when perception's description changed since it was last sent) and the model's answer.
Each round then costs only its new tokens and the answer (:mod:`homiebot.planner.text_lm`).

Decision: **each later user turn carries only what changed.** Appendix D's instruction repeats the task and
the whole historical execution every round; in a chat that keeps every earlier turn, that repetition is
already in the context, and on a CPU it was most of a late round's new tokens (100-250 of them). So the
first user turn is appendix D's full instruction (after the world description), and each later one keeps
appendix D's fields in its order but with only the new part (:func:`delta_instruction`)::

    Inventory: <the inventory now>
    Historical Execution: <only the items added since the last turn, e.g. "(4) Go to, fridge(success) ">
    Feedback: <the last round's feedback>
    Now based on the instruction above, please output Analysis, Subtask and Model in mentioned format.

The model still sees everything appendix D's window would show, and more: the task and the world
description in the first turn, every earlier history item in the turn that added it, and every earlier
answer. An instruction that is not in appendix D's form, or whose history does not extend the last one sent
(a planner wrapper that rewrote it), is sent whole.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

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
    """A later round's user turn (module docstring): appendix D's fields after the task, with only the history
    items after ``previous_history``. None when the history does not extend it (then the whole instruction goes)."""
    history = fields.history
    before = "" if previous_history == "None" else previous_history
    if not history.startswith(before):
        return None
    new = history[len(before) :].strip()
    return (
        f"Inventory: {fields.inventory}\nHistorical Execution: {new or 'None'}\n"
        f"Feedback: {fields.feedback}\n{INSTRUCTION_SUFFIX}"
    )


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


#: The heading of the world description in a user turn (the first one sent, then each changed one).
WORLD_HEADING = "World now:"
WORLD_UPDATED_HEADING = "World now (updated):"


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
    return parse_output(request.history[-1].answer).subtask


def fresh_text_chat(request: PlanRequest) -> list[ChatMessage]:
    """One round as a fresh chat in the text mode: the system turn, then one user turn with the world description
    and the round's instruction. What the hf planner sends with ``include_history=False``, and what ``homie data
    collect`` keeps for each round of an expert's episode (one function for both)."""
    return TextTranscript().conversation(request)


@dataclass
class TextTranscript:
    """One episode's growing chat for a text-only model (see the module docstring)."""

    turns: list[ChatMessage] = field(default_factory=list)
    last_description: str | None = None
    scene_names: tuple[str, ...] = ()
    #: Send later rounds only what changed (module docstring); False sends appendix D's whole instruction.
    delta_turns: bool = True
    #: The task and historical execution of the last kept user turn (None: nothing kept yet).
    last_fields: InstructionFields | None = None
    _scene_name: str | None = None
    _scene_text: str | None = None

    def reset(self) -> None:
        self.turns.clear()
        self.last_description = None
        self.last_fields = None
        self.scene_names = ()
        self._scene_name = self._scene_text = None

    def conversation(self, request: PlanRequest) -> list[ChatMessage]:
        """The chat for this round: the turns so far plus this round's user turn (not yet kept)."""
        if request.round_index <= 1 or not self.turns:
            self.reset()
            self.turns.append(ChatMessage("system", text_system_prompt(request.system_prompt)))
        description = self._description(request)
        text = self._user_text(request.instruction)
        if description is not None and description != self.last_description:
            if description.startswith(WORLD_HEADING):  # describe_world's own heading, for the first turn
                body = description.strip()
                if self.last_description is not None:
                    body = WORLD_UPDATED_HEADING + body[len(WORLD_HEADING) :]
            else:
                heading = "World description:" if self.last_description is None else "World description (updated):"
                body = f"{heading}\n{description.strip()}"
            text = f"{body}\n{text}"
        return [*self.turns, ChatMessage("user", text)]

    def keep(self, conversation: Sequence[ChatMessage], answer: str, request: PlanRequest) -> None:
        """Keep this round's user turn and the model's answer (the chat grows at its end)."""
        self.turns = [*conversation, ChatMessage("assistant", answer)]
        self.last_description = self._description(request)
        self.last_fields = parse_instruction(request.instruction)

    def _user_text(self, instruction: str) -> str:
        """This round's instruction as the user turn: only what changed since the last kept turn when it can."""
        previous = self.last_fields
        if not self.delta_turns or previous is None:
            return instruction
        fields = parse_instruction(instruction)
        if fields is None or fields.task != previous.task:
            return instruction
        return delta_instruction(fields, previous.history) or instruction

    def targets(self, request: PlanRequest) -> tuple[str, ...]:
        """The names a constrained answer may use: what perception grounded, else the described scene's names."""
        if request.grounded_targets:
            return tuple(request.grounded_targets)
        self._description(request)
        return self.scene_names

    def _description(self, request: PlanRequest) -> str | None:
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
