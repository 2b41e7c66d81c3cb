"""A parallel text world of the simulated scene: ALFWorld's observations and commands, rendered from the
simulator's state (never from a copy of it, so text and images always show the same world).

The strings are ALFWorld's (its grammar ``alfworld/data/alfred.twl2``, as the MuEP and EMMA papers use
them; docs/textworld.md lists them): "You are in the middle of a room. Looking quickly around you, you see a
countertop 1, a fridge 1, and a sinkbasin 1.", "You arrive at countertop 1. On the countertop 1, you see a
apple 1.", "The fridge 1 is closed.", "You pick up the apple 1 from the countertop 1.", "Nothing happens.".
Two phrasings (:class:`Phrasing`): ALFWorld 0.4's ``move X to Y`` ("You move the apple 1 to the fridge 1.")
and the papers' (ALFWorld 0.3 and earlier, used in ReAct, EMMA and MuEP prompts) ``put X in/on Y`` ("You put
the apple 1 in/on the fridge 1.", "You arrive at loc 3.").

A command runs the simulator's own skill (``homiebot/skills/actions.py``), so the text world follows the
simulator's dynamics, which differ from ALFWorld's in a few places (docs/textworld.md): opening needs an
empty hand, a skill can fail where ALFWorld's always succeeds (a blocked path), and the whole apartment is
one "room". A failed or inapplicable command answers "Nothing happens." and changes nothing.
"""

from __future__ import annotations

import enum
import logging
import re
from dataclasses import dataclass

from homiebot.sim.base import Simulator
from homiebot.skills.actions import action_spec
from homiebot.textworld.names import NameTable
from homiebot.types import Action, EntityKind, SkillResult, Subtask, WorldState, casefold_words

log = logging.getLogger(__name__)

NOTHING_HAPPENS = "Nothing happens."
BANNER = "-= Welcome to TextWorld, ALFRED! =-"
#: Beyond this reach distance the robot is no longer "at" the receptacle it last went to (EMMOE's D1 limit).
AT_DISTANCE_M = 2.0


class Phrasing(str, enum.Enum):
    """Which ALFWorld the text follows."""

    ALFWORLD = "alfworld"  # ALFWorld 0.4: "move X to Y", "You arrive at countertop 1."
    PAPERS = "papers"  # ALFWorld <= 0.3.5 as in ReAct / EMMA / MuEP: "put X in/on Y", "You arrive at loc N."


def join_things(names: list[str]) -> str:
    """ALFWorld's list: "a apple 1", "a apple 1, and a mug 1", "a apple 1, a mug 1, and a bowl 1" (the
    article is always "a", as in ALFWorld)."""
    items = [f"a {n}" for n in names]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


@dataclass(frozen=True)
class TextStep:
    """One command played in the text world."""

    command: str
    observation: str
    subtask: Subtask | None = None  # the skill it ran, in scene instance names (None: a text-only command)
    result: SkillResult | None = None
    admissible: bool = False  # the command was among the admissible ones before the step

    @property
    def changed_world(self) -> bool:
        return self.result is not None and self.result.success


_COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("go", re.compile(r"^go to (?P<r>.+)$")),
    ("take", re.compile(r"^take (?P<o>.+) from (?P<r>.+)$")),
    ("move", re.compile(r"^move (?P<o>.+) to (?P<r>.+)$")),
    ("put", re.compile(r"^put (?P<o>.+?) (?:in/on|in|on) (?P<r>.+)$")),
    ("open", re.compile(r"^open (?P<r>.+)$")),
    ("close", re.compile(r"^close (?P<r>.+)$")),
    ("treat", re.compile(r"^(?P<verb>heat|cool|clean) (?P<o>.+) with (?P<r>.+)$")),
    ("use", re.compile(r"^use (?P<r>.+)$")),
    ("examine", re.compile(r"^examine (?P<x>.+)$")),
    ("inventory", re.compile(r"^inventory$")),
    ("look", re.compile(r"^look$")),
    ("help", re.compile(r"^help$")),
)
def command_names(command: str, phrasing: Phrasing) -> list[str] | None:
    """The names a command mentions when it matches the grammar of ``phrasing``, else None."""
    text = casefold_words(command)
    for kind, pattern in _COMMANDS:
        if (kind == "put" and phrasing is not Phrasing.PAPERS) or (kind == "move" and phrasing is not Phrasing.ALFWORLD):
            continue
        match = pattern.match(text)
        if match is not None:
            return [v for k, v in match.groupdict().items() if k != "verb" and v is not None]
    return None


_TREAT_ACTION = {"heat": Action.HEAT, "cool": Action.COOL, "clean": Action.CLEAN}


class TextWorld:
    """The text view of one simulator episode. Call :meth:`reset` after the simulator's reset.

    Args:
        sim: the simulator whose state is rendered and whose skills the commands run.
        phrasing: ALFWorld 0.4's or the papers' (see :class:`Phrasing`).
    """

    def __init__(self, sim: Simulator, phrasing: Phrasing | str = Phrasing.ALFWORLD) -> None:
        self.sim = sim
        self.phrasing = Phrasing(phrasing)
        self.instruction = ""
        self.location: str | None = None  # the receptacle the agent is at (instance name)
        self._names: NameTable | None = None
        self._holders: frozenset[str] = frozenset()  # furniture with a surface or an interior

    # ------------------------------------------------------------------------------------ state

    def reset(self, instruction: str = "") -> str:
        """Start an episode on the simulator's current scene; returns ALFWorld's intro text."""
        self.instruction = instruction.strip().rstrip(".")
        self._names = NameTable.from_state(self.sim.state())
        spec = self.sim.scene_spec()
        self._holders = frozenset(f.name for f in spec.furniture if f.surfaces or f.interior is not None)
        self.location = None
        return self.intro()

    @property
    def names(self) -> NameTable:
        if self._names is None:
            raise RuntimeError("call TextWorld.reset() after the simulator's reset")
        return self._names

    def can_hold(self, receptacle: str) -> bool:
        """Whether a receptacle (instance name) has a surface or an interior that things can be put on or in."""
        return receptacle in self._holders

    def _state(self) -> WorldState:
        state = self.sim.state()
        if self.location is not None and state.reach_distance(self.location) > AT_DISTANCE_M:
            self.location = None  # the robot was moved away (by a skill the text world did not run)
        return state

    # ------------------------------------------------------------------------------------ rendering

    def intro(self) -> str:
        """Banner, room sentence and task, separated by blank lines (MuEP reads paragraphs 2 and 3)."""
        parts = [BANNER, self.room_sentence()]
        if self.instruction:
            parts.append(f"Your task is to: {self.instruction}.")
        return "\n\n".join(parts)

    def room_sentence(self) -> str:
        names = [self.names.text(r) for r in self.names.receptacles]
        return f"You are in the middle of a room. Looking quickly around you, you see {join_things(names)}."

    def describe(self, receptacle: str, state: WorldState | None = None) -> str:
        """ALFWorld's examine text of a receptacle (instance name): "On the countertop 1, you see a apple 1.",
        "The fridge 1 is closed.", "The fridge 1 is open. In it, you see nothing."."""
        state = state if state is not None else self._state()
        entity = state.entities[receptacle]
        text = self.names.text(receptacle)
        inside = [self.names.text(o) for o in self._contents(state, receptacle, "in")]
        on_top = [self.names.text(o) for o in self._contents(state, receptacle, "on")]
        if entity.articulated:
            if not entity.is_open:
                sentence = f"The {text} is closed."
            else:
                sentence = f"The {text} is open. In it, you see {join_things(inside) or 'nothing'}."
            if on_top:  # a drawer's or cabinet's top (ALFWorld's receptacles have no top and inside at once)
                sentence += f" On the {text}, you see {join_things(on_top)}."
            return sentence
        seen = on_top + inside
        return f"On the {text}, you see {join_things(seen) or 'nothing'}."

    def _contents(self, state: WorldState, receptacle: str, relation: str) -> list[str]:
        names = [n for n in state.objects_in(receptacle) if state.entities[n].relation == relation and n in self.names.to_text]
        return sorted(names, key=lambda n: _order(self.names.text(n)))

    def look(self, state: WorldState | None = None) -> str:
        state = state if state is not None else self._state()
        if self.location is None:
            return self.room_sentence()
        return f"You are facing the {self.names.text(self.location)}. Next to it, you see nothing."

    def inventory(self, state: WorldState | None = None) -> str:
        state = state if state is not None else self._state()
        if state.held is None or state.held not in self.names.to_text:
            return "You are not carrying anything."
        return f"You are carrying: {join_things([self.names.text(state.held)])}."

    def examine_object(self, obj: str, state: WorldState) -> str:
        """ALFWorld's examine text of an object: one state word (hot, cold, clean) or nothing special."""
        entity = state.entities[obj]
        text = self.names.text(obj)
        for flag, word in ((entity.is_hot, "hot"), (entity.is_cold, "cold"), (entity.is_clean, "clean")):
            if flag:
                return f"This is a {word} {text}."
        return f"There's nothing special about {text}."

    def arrive_text(self, receptacle: str, state: WorldState) -> str:
        if self.phrasing is Phrasing.PAPERS:
            where = f"loc {self.names.receptacles.index(receptacle) + 1}"
        else:
            where = self.names.text(receptacle)
        return f"You arrive at {where}. {self.describe(receptacle, state)}"

    def put_command(self, obj_text: str, receptacle_text: str) -> str:
        if self.phrasing is Phrasing.PAPERS:
            return f"put {obj_text} in/on {receptacle_text}"
        return f"move {obj_text} to {receptacle_text}"

    # ------------------------------------------------------------------------------------ commands

    def admissible_commands(self) -> list[str]:
        """What ALFWorld would accept now, sorted (``infos["admissible_commands"]``)."""
        state = self._state()
        names = self.names
        commands = {"inventory", "look", "help"}
        here = self.location
        commands.update(f"go to {names.text(r)}" for r in names.receptacles if r != here)
        held = state.held if state.held in names.to_text else None
        if held is not None:
            commands.add(f"examine {names.text(held)}")
        if here is not None:
            entity = state.entities[here]
            rtext = names.text(here)
            commands.add(f"examine {rtext}")
            if entity.articulated and held is None:  # the simulator opens and closes with an empty hand (EMMOE's L1)
                commands.add(f"{'close' if entity.is_open else 'open'} {rtext}")
            accessible = not entity.articulated or bool(entity.is_open)
            if held is None:
                reachable = self._contents(state, here, "on") + (self._contents(state, here, "in") if accessible else [])
                commands.update(f"take {names.text(o)} from {rtext}" for o in reachable)
            else:
                otext = names.text(held)
                if accessible and here in self._holders:
                    commands.add(self.put_command(otext, rtext))
                for verb, function in (("heat", "heat"), ("cool", "cool"), ("clean", "clean")):
                    if function in entity.functions:
                        commands.add(f"{verb} {otext} with {rtext}")
            if entity.powered_on is not None:
                commands.add(f"use {rtext}")
        return sorted(commands)

    def step(self, command: str) -> TextStep:
        """Play one command: run its skill on the simulator when it is one, answer ALFWorld's text."""
        text = casefold_words(command)
        admissible = text in self.admissible_commands()
        for kind, pattern in _COMMANDS:
            match = pattern.match(text)
            if match is None:
                continue
            if kind == "put" and self.phrasing is not Phrasing.PAPERS or kind == "move" and self.phrasing is not Phrasing.ALFWORLD:
                continue  # each ALFWorld version knows one phrasing; the other is "Nothing happens."
            step = self._play(kind, match, text)
            return TextStep(step.command, step.observation, step.subtask, step.result, admissible)
        return TextStep(text, NOTHING_HAPPENS, admissible=admissible)

    def _play(self, kind: str, match: re.Match[str], text: str) -> TextStep:
        state = self._state()
        names = self.names
        groups = match.groupdict()
        receptacle = names.instance(groups["r"]) if groups.get("r") else None
        obj = names.instance(groups["o"]) if groups.get("o") else None
        nothing = TextStep(text, NOTHING_HAPPENS)
        if kind == "inventory":
            return TextStep(text, self.inventory(state))
        if kind == "look":
            return TextStep(text, self.look(state))
        if kind == "help":
            return TextStep(text, "Available commands: " + ", ".join(_HELP) + ".")
        if kind == "examine":
            thing = names.instance(groups["x"])
            if thing is None:
                return nothing
            if state.entities[thing].kind is EntityKind.OBJECT:
                visible = thing == state.held or (self.location is not None and state.entities[thing].parent == self.location)
                return TextStep(text, self.examine_object(thing, state)) if visible else nothing
            return TextStep(text, self.describe(thing, state)) if thing == self.location else nothing
        if receptacle is None or receptacle not in names.receptacles:
            return nothing
        if kind == "go":
            if receptacle == self.location:
                return nothing
            return self._run(text, Subtask(Action.GO_TO.value, receptacle))
        if receptacle != self.location:
            return nothing  # every other command acts where the agent stands, as in ALFWorld
        if kind == "take":
            if obj is None or state.held is not None or state.entities[obj].parent != receptacle:
                return nothing
            return self._run(text, Subtask(Action.PICK.value, obj))
        if kind in ("move", "put"):
            if obj is None or state.held != obj:
                return nothing
            return self._run(text, Subtask(Action.PUT.value, obj, receptacle))
        if kind in ("open", "close"):
            entity = state.entities[receptacle]
            if not entity.articulated or entity.is_open == (kind == "open"):
                return nothing
            return self._run(text, Subtask((Action.OPEN if kind == "open" else Action.CLOSE).value, receptacle))
        if kind == "treat":
            if obj is None or state.held != obj:
                return nothing
            return self._run(text, Subtask(_TREAT_ACTION[groups["verb"]].value, obj, receptacle))
        if kind == "use":
            powered = state.entities[receptacle].powered_on
            if powered is None:
                return nothing
            return self._run(text, Subtask((Action.TURN_OFF if powered else Action.TURN_ON).value, receptacle))
        return nothing

    def _run(self, text: str, subtask: Subtask) -> TextStep:
        action = Action.parse(subtask.action)
        assert action is not None and subtask.target is not None
        self.sim.reset_arm()
        result = action_spec(action).run(self.sim, subtask.target, subtask.place)
        if not result.success:
            log.debug("%s: %s (%s)", text, result.status.value, result.detail)
            return TextStep(text, NOTHING_HAPPENS, subtask, result)
        return TextStep(text, self.after(subtask), subtask, result)

    # ------------------------------------------------------------------------------------ rounds

    def after(self, subtask: Subtask) -> str:
        """ALFWorld's text for a subtask (instance names) that has just succeeded, and where the agent now is.

        The loop calls this after every successful round of an EMMOE planner in text mode, so that a
        planner that acts with EMMOE's subtasks reads ALFWorld's observations of the same world."""
        action = Action.parse(subtask.action)
        target, place = subtask.target, subtask.place
        state = self.sim.state()
        names = self.names
        if action is Action.GO_TO and target is not None:
            entity = state.entities.get(target)
            if entity is None or entity.kind is EntityKind.ROOM:
                self.location = None
                return self.look(state)
            spot = target if entity.kind is EntityKind.FURNITURE else entity.parent
            if spot is None or spot not in names.receptacles:
                self.location = None
                return self.look(state)
            self.location = spot
            return self.arrive_text(spot, state)
        if target is None or target not in names.to_text:
            return NOTHING_HAPPENS
        ttext = names.text(target)
        ptext = names.text(place) if place is not None and place in names.to_text else None
        if action is Action.PICK:
            source = self.location if self.location is not None else "the floor"
            where = names.text(source) if source in names.to_text else source
            return f"You pick up the {ttext} from the {where}."
        if action is Action.PUT and ptext is not None:
            self.location = place
            if self.phrasing is Phrasing.PAPERS:
                return f"You put the {ttext} in/on the {ptext}."
            return f"You move the {ttext} to the {ptext}."
        if action is Action.OPEN:
            self.location = target
            return f"You open the {ttext}. {self.describe(target, state)}"
        if action is Action.CLOSE:
            self.location = target
            return f"You close the {ttext}."
        if action in (Action.HEAT, Action.COOL, Action.CLEAN) and ptext is not None:
            self.location = place
            return f"You {action.value.lower()} the {ttext} using the {ptext}."
        if action in (Action.TURN_ON, Action.TURN_OFF):
            self.location = target
            return f"You turn {'on' if action is Action.TURN_ON else 'off'} the {ttext}."
        return NOTHING_HAPPENS

    def observation_after(self, subtask: Subtask | None, success: bool) -> str:
        """The text observation of one round: :meth:`after` on success, "Nothing happens." otherwise."""
        if subtask is None or not success or subtask.is_end:
            return NOTHING_HAPPENS
        return self.after(subtask)


_HELP = (
    "look",
    "inventory",
    "go to (receptacle)",
    "open (receptacle)",
    "close (receptacle)",
    "take (object) from (receptacle)",
    "move (object) to (receptacle)",
    "examine (something)",
    "use (object)",
    "heat (object) with (receptacle)",
    "clean (object) with (receptacle)",
    "cool (object) with (receptacle)",
)


def _order(text: str) -> tuple[str, int]:
    word, number = text.rsplit(" ", 1)
    return word, int(number)
