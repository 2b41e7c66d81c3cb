"""A person at the keyboard as a planner: :class:`KeyboardPlanner` reads one subtask per round from a text stream.

PARTNR puts real people in the loop (PARTNR paper, section 5, "human-in-the-loop evaluation": a person drives the
humanoid through a browser while a planner drives the robot). ``homie play`` does the same in a terminal
(docs/play.md): each round the person sees the agent's four views, a text description of the house and what
happened last, and types the next subtask in EMMOE's format (EMMOE paper, appendix D: ``[Go to, fridge]``,
``[Put, apple, fridge]``, ``[End]``) or picks one of the listed admissible subtasks by number. The answer goes
through the same parser, executor and record as any model's, so a person's episode is scored like any other.

The planner reads lines from any text stream (a terminal, a pipe, a test's ``io.StringIO``) and shows its
screen through a :class:`PlayScreen`-like object (:mod:`homiebot.play.screen`), so it runs without a terminal.

Decisions:

* **Privileged.** The person reads the world state (the description and the admissible list are built from it),
  never the goal: PARTNR's participants see the rendered house and a task text, and a text interface needs the
  names written out instead. The description names every entity, so nothing is hidden that the views show.
* **What is refused at the keyboard** (one line, then the same prompt again): a line that is not a command, a
  number or a bracketed subtask; an action or model not in the episode's lists; the wrong number of parts;
  a name that does not ground in the house (with the closest names as a hint). What an executor would refuse
  for the world's sake (too far, hand full, a closed container) is *not* refused here: it is the person's
  round, answered with EMMOE's feedback like anyone's.
* **The model** may follow the subtask (``[Pick, apple] RT-1-X`` or ``... Model: RT-1-X``); without one, the first
  listed model that serves the action (EMMOE table E2: NoMaD goes, RT-1-X picks and puts, octo opens and
  switches) is used, so the person never has to know the low-level models.
* **Admissible subtasks** are the ones that pass the executor's own pre-checks on the current state (hand, closed
  container, what the action acts on, the 0.1-2 m reach; ``homiebot/skills/actions.py``) and change something
  (opening what is open succeeds and does nothing: it is not listed), plus every Go to and End. An admissible
  subtask can still fail in execution (a blocked path, execution noise).
* **quit** (or the end of the input) raises :class:`PlayerQuit`: the episode stops there and is recorded as
  ended by the user (:mod:`homiebot.play.episode`), not as a planner failure.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TextIO

from homiebot.config import FAR_THRESHOLD_M, NEAR_THRESHOLD_M
from homiebot.config.planners import PlannerConfig
from homiebot.executor.executor import DEFAULT_MODEL_ACTIONS
from homiebot.perception.grounding import AliasGrounder, Grounder, entity_phrases
from homiebot.planner.base import EpisodeStopRequested, Planner, PlanRequest
from homiebot.skills.actions import HandRule, action_spec
from homiebot.types import Action, EntityKind, RoundRecord, Subtask, WorldState, casefold_words

log = logging.getLogger(__name__)

#: The analysis written into the answer of a person's round (EMMOE's format has one; a person gives none).
PLAYER_ANALYSIS = "The person at the keyboard chose this subtask."
#: PARTNR's Wait tool as the two-agent loop names it (homiebot.agent.loop.WAIT_ACTION, where it exists).
WAIT = "Wait"
QUIT_WORDS = frozenset({"quit", "exit", "q"})
HELP_WORDS = frozenset({"help", "h", "?"})
LIST_WORDS = frozenset({"list", "ls", "l"})
LOOK_WORDS = frozenset({"look", "world"})
# "[Pick, apple]", "Subtask: [Put, apple, fridge] Model: RT-1-X", "[Go to, fridge] NoMaD"
_SUBTASK = re.compile(r"^(?:subtask\s*:\s*)?\[(?P<body>[^\[\]]*)\]\s*(?:model\s*:\s*)?(?P<model>.*?)\s*$", re.I)


class PlayerQuit(EpisodeStopRequested):
    """The person at the keyboard stopped the episode (typed ``quit``, or the input ended): the loop's clean stop,
    not a failure."""

    def __init__(self, round_index: int, reason: str) -> None:
        super().__init__(f"the player quit in round {round_index} ({reason})")
        self.round_index = round_index
        self.reason = reason


class EntryError(ValueError):
    """A typed line that is not a usable entry; the message is the one line the person sees."""


@dataclass(frozen=True)
class Choice:
    """A subtask with the low-level model that will run it."""

    subtask: Subtask
    model: str

    def answer(self) -> str:
        """The planner's answer in EMMOE's response template (appendix D)."""
        return f"Analysis: {PLAYER_ANALYSIS}\nSubtask: {self.subtask.text()}\nModel: {self.model}"


@dataclass(frozen=True)
class Command:
    """What one typed line asks for: a subtask (``choice``), or ``help`` / ``list`` / ``look`` / ``quit``."""

    kind: str
    choice: Choice | None = None


@dataclass(frozen=True)
class TypedLine:
    """One line the person typed, kept for the record (``play.json``): the round, the text, what came of it."""

    round_index: int
    text: str
    outcome: str  # "subtask", "help", "list", "look", "quit", "end of input", or "refused: <the line shown>"


class Screen(Protocol):
    """What the planner shows the person (:class:`homiebot.play.screen.PlayScreen`; tests pass their own)."""

    def show_request(self, request: PlanRequest, menu: Sequence[Choice]) -> None: ...

    def show_help(self, request: PlanRequest) -> None: ...

    def show_menu(self, menu: Sequence[Choice]) -> None: ...

    def show_world(self, request: PlanRequest) -> None: ...

    def refuse(self, message: str) -> None: ...

    def prompt(self) -> None: ...


def default_model(action: Action, models: Sequence[str]) -> str:
    """The first of ``models`` that serves ``action`` (EMMOE table E2), else the first listed; ``None`` for End."""
    if action is Action.END:
        return "None"
    for model in models:
        if action in DEFAULT_MODEL_ACTIONS.get(model, ()):
            return model
    return models[0] if models else "None"


def _parse_action(text: str, actions: Sequence[str]) -> Action:
    key = casefold_words(text)
    listed = {casefold_words(a): a for a in actions}
    action = Action.parse(text)
    if action is None or key not in listed:
        raise EntryError(f"unknown action {text.strip()!r}; the actions are: {', '.join(actions)}")
    return action


def _parse_model(text: str, action: Action, models: Sequence[str]) -> str:
    text = " ".join(text.split())
    if not text:
        return default_model(action, models)
    if action is Action.END:
        if text.lower() != "none":
            raise EntryError("[End] takes no model")
        return "None"
    for model in models:
        if model.lower() == text.lower():
            return model
    raise EntryError(f"unknown model {text!r}; the models are: {', '.join(models)} (or leave it out)")


def _closest(text: str, state: WorldState, limit: int = 3) -> list[str]:
    """The instance names whose name or phrases (category, aliases) are closest to ``text``."""
    owner: dict[str, str] = {}
    for entity in sorted(state.entities.values(), key=lambda e: e.name):
        for phrase in (entity.name, *entity_phrases(entity)):
            owner.setdefault(phrase.lower(), entity.name)
    found: list[str] = []
    for phrase in difflib.get_close_matches(text.strip().lower(), sorted(owner), n=4 * limit, cutoff=0.5):
        if owner[phrase] not in found:
            found.append(owner[phrase])
    return found[:limit]


def _check_name(text: str, state: WorldState | None, grounder: Grounder, what: str) -> None:
    if state is None:  # nothing to check against (no state reached this planner): the executor judges
        return
    if grounder.ground(text, state).instance is not None:
        return
    hint = _closest(text, state)
    suffix = f"; did you mean {' or '.join(repr(h) for h in hint)}?" if hint else "; `look` lists the names"
    raise EntryError(f"there is no {what} {text!r} in this house{suffix}")


def _listed(word: str, actions: Sequence[str]) -> bool:
    return casefold_words(word) in {casefold_words(a) for a in actions}


def parse_subtask(line: str, request: PlanRequest, grounder: Grounder | None = None) -> Choice:
    """A typed ``[Action, target(, place)] (Model)`` as a :class:`Choice`; :class:`EntryError` names what is wrong."""
    match = _SUBTASK.match(line.strip())
    if match is None:
        raise EntryError(
            f"not a subtask: {line.strip()!r}; write [Action, target] or [Put, object, place], a number from the "
            "list, or help"
        )
    parts = [p.strip() for p in match.group("body").split(",")]
    if not parts[0]:
        raise EntryError("the subtask names no action; write e.g. [Go to, fridge]")
    actions = request.actions or tuple(a.value for a in Action)
    if casefold_words(parts[0]) == casefold_words(WAIT) and _listed(WAIT, actions):
        # PARTNR's Wait (two-agent episodes): a round that does nothing while the other agent acts.
        if len(parts) > 1 or match.group("model").strip() not in ("", "None", "none"):
            raise EntryError("[Wait] takes no target and no model")
        return Choice(Subtask(WAIT), "None")
    action = _parse_action(parts[0], actions)
    model = _parse_model(match.group("model"), action, request.models)
    if action is Action.END:
        if len(parts) > 1:
            raise EntryError("[End] takes no target")
        return Choice(Subtask(action.value), model)
    spec = action_spec(action)
    wanted = 3 if spec.needs_place else 2
    if len(parts) != wanted or not all(parts):
        shape = f"[{action.value}, object, place]" if spec.needs_place else f"[{action.value}, target]"
        raise EntryError(f"{action.value} is written {shape}")
    grounder = grounder or AliasGrounder()
    _check_name(parts[1], request.world_state, grounder, "object" if spec.needs_place else "target")
    if spec.needs_place:
        _check_name(parts[2], request.world_state, grounder, "place")
    return Choice(Subtask(action.value, parts[1], parts[2] if spec.needs_place else None), model)


def parse_entry(line: str, request: PlanRequest, menu: Sequence[Choice], grounder: Grounder | None = None) -> Command:
    """One typed line as a :class:`Command`; :class:`EntryError` (one line for the person) when it is not one."""
    text = line.strip()
    word = text.lower()
    if not text:
        raise EntryError("type a subtask such as [Go to, fridge], a number from the list, help or quit")
    if word in QUIT_WORDS:
        return Command("quit")
    if word in HELP_WORDS:
        return Command("help")
    if word in LIST_WORDS:
        return Command("list")
    if word in LOOK_WORDS:
        return Command("look")
    if text.isdigit():
        number = int(text)
        if not menu:
            raise EntryError("there is no list this round; type a subtask")
        if not 1 <= number <= len(menu):
            raise EntryError(f"no subtask number {number}; choose 1-{len(menu)}")
        return Command("subtask", menu[number - 1])
    return Command("subtask", parse_subtask(text, request, grounder))


def admissible_subtasks(
    state: WorldState | None,
    inventory: Sequence[str],
    actions: Sequence[str],
    models: Sequence[str],
    *,
    far_m: float = FAR_THRESHOLD_M,
    near_m: float = NEAR_THRESHOLD_M,
) -> list[Choice]:
    """The subtasks the executor's pre-checks would let through now (module docstring), in a fixed order: the
    manipulations first (they are what a round is usually about), then Go to every furniture and loose object,
    then Wait (two-agent episodes) and End. Names are the scene's instance names, which the executor grounds exactly."""
    if state is None:
        return [Choice(Subtask(Action.END.value), "None")] if "End" in actions else []
    listed = [a for a in (Action.parse(x) for x in actions) if a is not None]
    furniture = sorted(n for n, e in state.entities.items() if e.kind is EntityKind.FURNITURE)
    objects = sorted(n for n, e in state.entities.items() if e.kind is EntityKind.OBJECT and not e.held)
    held = state.held

    def reachable(name: str) -> bool:
        return near_m <= state.reach_distance(name) <= far_m

    def closed(name: str | None) -> bool:
        entity = state.entities.get(name) if name is not None else None
        return entity is not None and entity.articulated and entity.is_open is False

    manipulations: list[Subtask] = []
    for action in listed:
        if action in (Action.GO_TO, Action.END):
            continue
        spec = action_spec(action)
        if spec.hand is HandRule.EMPTY and inventory:
            continue
        if spec.hand is HandRule.HOLDING and (not inventory or held is None):
            continue
        if spec.needs_place:
            assert held is not None
            for place in furniture:
                entity = state.entities[place]
                if spec.place_must_be_open and closed(place):
                    continue
                if spec.acts_on is not None and not spec.acts_on(entity):
                    continue
                if reachable(place):
                    manipulations.append(Subtask(action.value, held, place))
            continue
        pool = objects if action is Action.PICK else furniture
        for name in pool:
            entity = state.entities[name]
            if spec.acts_on is not None and not spec.acts_on(entity):
                continue
            if action is Action.PICK and closed(entity.parent):
                continue  # inside a closed container: the skill refuses it
            if action is Action.OPEN and entity.is_open is not False:
                continue
            if action is Action.CLOSE and entity.is_open is not True:
                continue
            if action is Action.TURN_ON and entity.powered_on is not False:
                continue
            if action is Action.TURN_OFF and entity.powered_on is not True:
                continue
            if reachable(name):
                manipulations.append(Subtask(action.value, name))
    choices = [Choice(s, default_model(Action.parse(s.action) or Action.END, models)) for s in manipulations]
    if Action.GO_TO in listed:
        choices += [Choice(Subtask(Action.GO_TO.value, n), default_model(Action.GO_TO, models))
                    for n in (*furniture, *objects)]
    if _listed(WAIT, actions):
        choices.append(Choice(Subtask(WAIT), "None"))
    if Action.END in listed:
        choices.append(Choice(Subtask(Action.END.value), "None"))
    return choices


class KeyboardPlannerConfig(PlannerConfig):
    """The person at the keyboard as a run configuration names the planner (a played record's ``run``): no options.
    ``homie play`` makes the planner (it reads this terminal), so the planner registry does not offer it and
    ``homie run --config`` refuses a played record by this name."""

    name: Literal["keyboard"] = "keyboard"


@dataclass
class KeyboardPlanner(Planner):
    """A planner whose answers a person types (module docstring).

    ``stdin``: where the lines come from; ``screen``: what shows the round (None: nothing is shown, for tests
    that only feed lines). ``typed`` keeps every line with what came of it, for the record.
    """

    stdin: TextIO
    screen: Screen | None = None
    grounder: Grounder = field(default_factory=AliasGrounder)
    typed: list[TypedLine] = field(default_factory=list)
    quit_event: PlayerQuit | None = None

    name = "keyboard"
    privileged = True
    accepts_free_text = True
    needs_views = True

    def reset(self, task: str, seed: int = 0) -> None:
        self.typed = []
        self.quit_event = None

    def plan(self, request: PlanRequest) -> str:
        menu = admissible_subtasks(request.world_state, request.inventory, request.actions, request.models)
        if self.screen is not None:
            self.screen.show_request(request, menu)
        while True:
            if self.screen is not None:
                self.screen.prompt()
            line = self.stdin.readline()
            if line == "":  # the input ended (Ctrl-D, a closed pipe): a clean stop, like quit
                self.typed.append(TypedLine(request.round_index, "", "end of input"))
                self.quit_event = PlayerQuit(request.round_index, "end of input")
                raise self.quit_event
            try:
                command = parse_entry(line, request, menu, self.grounder)
            except EntryError as err:
                self.typed.append(TypedLine(request.round_index, line.rstrip("\n"), f"refused: {err}"))
                if self.screen is not None:
                    self.screen.refuse(str(err))
                continue
            self.typed.append(TypedLine(request.round_index, line.rstrip("\n"), command.kind))
            if command.kind == "quit":
                self.quit_event = PlayerQuit(request.round_index, "typed quit")
                raise self.quit_event
            if command.choice is not None:
                log.debug("round %d: the player chose %s", request.round_index, command.choice.subtask.text())
                return command.choice.answer()
            if self.screen is not None:
                if command.kind == "help":
                    self.screen.show_help(request)
                elif command.kind == "list":
                    self.screen.show_menu(menu)
                elif command.kind == "look":
                    self.screen.show_world(request)


def last_round_line(record: RoundRecord) -> str:
    """One line for what a round did: ``(3) [Open, kitchen_drawer] -> OK`` or the code and EMMOE's message."""
    outcome = record.feedback.code.value
    if not record.feedback.success:
        outcome += f" {record.feedback.message}"
    return f"({record.index}) {record.subtask_text} -> {outcome}"
