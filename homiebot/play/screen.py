"""What ``homie play`` shows the person at the keyboard each round (docs/play.md), on a rich console.

Per round: the round and the task; the agent's four views saved as one 2x2 image (its path is printed, so any
image viewer opens it) and, where the terminal has colour, a small preview drawn with half-block characters
(each character cell shows two pixels, its foreground the upper one and its background the lower one); what
the last round did and its EMMOE feedback; where the agent is and what it holds; the objects and where they
are (``look`` adds the furniture of every room); the admissible subtasks, numbered.

The screen is also an episode observer (:mod:`homiebot.agent.observers`): after every round it prints the
round's line, so the person sees the outcome of their own subtask at once and, in a two-agent episode, what
the other agent did.

Log lines would be drawn between the screen's lines (the loop's INFO line of a failed round repeats what the
screen shows; the recorder's and the planners' lines mean nothing to the person): while the screen is up,
:func:`logs_to_file` sends every log line to a file and lets only warnings and errors through to the terminal.
Names that mean "nothing" in EMMOE's text (the model ``None`` of an ``[End]``, the inventory ``None``) are shown
as ``-`` / ``nothing``: the screen is for a person, not a parser.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from rich.console import Console
from rich.markup import escape
from rich.style import Style
from rich.text import Text

from homiebot.agent.observers import ObserverBase
from homiebot.planner.base import PlanRequest
from homiebot.play.keyboard import Choice, last_round_line
from homiebot.report.shown import is_nothing
from homiebot.types import VIEW_NAMES, EntityKind, EntityState, RoundRecord, WorldState

log = logging.getLogger(__name__)

#: Width of the terminal preview in character cells (the 2x2 views are square: half as many rows).
PREVIEW_COLUMNS = 48

HELP_TEXT = """\
Each round you give one subtask, in EMMOE's format:
  [Go to, fridge]            go to a furniture or an object
  [Pick, apple]              pick an object up (the hand must be empty, 0.1-2 m away)
  [Put, apple, fridge]       put the held object in or on a furniture (open it first if it is closed)
  [Open, fridge] [Close, fridge]   and, where the task has them, [Turn on, lamp] [Clean, cup, sink] ...
  [Wait]                     (beside the robot) do nothing this round
  [End]                      you are done (the task is checked when every agent has ended)
A model may follow ([Pick, apple] RT-1-X); without one the usual model for the action runs.
  3                          the third subtask of the list
  list                       the admissible subtasks again
  look                       the whole house: rooms, furniture, objects
  help                       this text
  quit                       stop here; the episode is recorded as ended by you"""


#: The format of the log file written while the screen is up (the command line's own, homiebot/cli/__init__.py).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextmanager
def logs_to_file(path: Path) -> Iterator[Path]:
    """While the block runs, every log line the root logger passes goes to ``path`` (appended) and the
    terminal's handlers show only warnings and errors; both are as before afterwards (module docstring)."""
    root = logging.getLogger()
    terminals = [h for h in root.handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    levels = [h.level for h in terminals]
    file_handler = logging.FileHandler(path, encoding="utf-8", delay=True)  # no file when nothing is logged
    file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(file_handler)
    for handler in terminals:
        handler.setLevel(max(handler.level, logging.WARNING))
    try:
        yield path
    finally:
        root.removeHandler(file_handler)
        file_handler.close()
        for handler, level in zip(terminals, levels, strict=True):
            handler.setLevel(level)


def mosaic(images: Sequence[np.ndarray], names: Sequence[str] = VIEW_NAMES) -> np.ndarray:
    """The four views as one 2x2 image (front, left / back, right), each labelled in its corner."""
    if not images:
        raise ValueError("no views to lay out")
    height, width = images[0].shape[:2]
    canvas = Image.new("RGB", (2 * width, 2 * height), (0, 0, 0))
    draw = ImageDraw.Draw(canvas)
    for index, image in enumerate(images[:4]):
        x, y = (index % 2) * width, (index // 2) * height
        canvas.paste(Image.fromarray(np.asarray(image, dtype=np.uint8)[..., :3]), (x, y))
        label = names[index] if index < len(names) else str(index)
        draw.rectangle((x + 3, y + 3, x + 7 + 6 * len(label), y + 16), fill=(20, 20, 20))
        draw.text((x + 5, y + 4), label, fill=(235, 235, 235))
    return np.asarray(canvas)


def half_block_preview(image: np.ndarray, columns: int = PREVIEW_COLUMNS) -> Text:
    """``image`` as rich text of ``columns`` cells per line, two pixels per cell (upper half block)."""
    height, width = image.shape[:2]
    rows = max(1, round(columns * height / width / 2))
    small = np.asarray(Image.fromarray(np.asarray(image, dtype=np.uint8)[..., :3]).resize((columns, 2 * rows)))
    text = Text()
    for row in range(rows):
        upper, lower = small[2 * row], small[2 * row + 1]
        for (r1, g1, b1), (r2, g2, b2) in zip(upper.tolist(), lower.tolist(), strict=True):
            text.append("\u2580", Style(color=f"rgb({r1},{g1},{b1})", bgcolor=f"rgb({r2},{g2},{b2})"))
        text.append("\n")
    return text


def _furniture_label(entity: EntityState) -> str:
    flags = []
    if entity.articulated and entity.is_open is not None:
        flags.append("open" if entity.is_open else "closed")
    if entity.powered_on is not None:
        flags.append("on" if entity.powered_on else "off")
    return f"{entity.name} ({', '.join(flags)})" if flags else entity.name


def _object_states(entity: EntityState, cleaning: bool) -> str:
    states = []
    if cleaning and entity.is_clean is not None:
        states.append("clean" if entity.is_clean else "dirty")
    if entity.is_hot:
        states.append("hot")
    if entity.is_cold:
        states.append("cold")
    return f" [{', '.join(states)}]" if states else ""


def where_line(state: WorldState, who: str = "You") -> str:
    """``You are in the kitchen, holding the apple.``"""
    room = state.robot_room.replace("_", " ") if state.robot_room else "no room"
    holding = f"the {state.held}" if state.held else "nothing"
    return f"{who} are in the {room}, holding {holding}."


def other_agents_lines(state: WorldState, me: str) -> list[str]:
    """Where the other agents of a two-agent world are and what they hold (empty with one agent)."""
    lines = []
    for agent in state.agents:
        if agent.name == me:
            continue
        room = agent.room.replace("_", " ") if agent.room else "no room"
        holding = f"the {agent.held}" if agent.held else "nothing"
        lines.append(f"The {agent.name} is in the {room}, holding {holding}.")
    return lines


def describe_objects(state: WorldState, cleaning: bool = False) -> list[str]:
    """One line per object: where it is, its states, and how far it is from the agent (reach distance).
    ``cleaning``: say clean or dirty (only where the task has a Clean action: every object has the state)."""
    lines = []
    for name in sorted(n for n, e in state.entities.items() if e.kind is EntityKind.OBJECT):
        entity = state.entities[name]
        if entity.held:
            holder = next((f"the {a.name}" for a in state.agents if a.held == name and name != state.held), "you")
            lines.append(f"{name}: held by {holder}{_object_states(entity, cleaning)}")
            continue
        if entity.parent is not None:
            room = state.entities[entity.parent].room if entity.parent in state.entities else entity.room
            place = f"{entity.relation or 'on'} {entity.parent}" + (f" ({room})" if room else "")
        else:
            place = f"on the floor ({entity.room})" if entity.room else "on the floor"
        lines.append(f"{name}: {place}{_object_states(entity, cleaning)}, {state.reach_distance(name):.1f} m away")
    return lines


def describe_furniture(state: WorldState) -> list[str]:
    """``room: furniture, furniture (closed), ...`` for every room, in name order."""
    rooms: dict[str, list[str]] = {}
    for name in sorted(n for n, e in state.entities.items() if e.kind is EntityKind.FURNITURE):
        entity = state.entities[name]
        rooms.setdefault(entity.room or "elsewhere", []).append(_furniture_label(entity))
    return [f"{room}: {', '.join(items)}" for room, items in sorted(rooms.items())]


class PlayScreen(ObserverBase):
    """Shows the rounds to the person (module docstring) and saves each round's views into ``views_dir``.

    ``preview``: draw the views in the terminal too (``None``: when the console is a terminal with colour).
    ``role``: who the person plays (``robot`` or ``human``), for the headings.
    """

    def __init__(self, console: Console, views_dir: Path | None, *, preview: bool | None = None,
                 role: str = "robot", task_id: str | None = None) -> None:
        self.console = console
        self.views_dir = views_dir
        self.preview = preview if preview is not None else (console.is_terminal and console.color_system is not None)
        self.role = role
        self.task_id = task_id
        self.saved: list[Path] = []  # every views image written, in round order
        self.other = "robot" if role == "human" else None  # the agent a planner drives beside the person
        self.other_last: RoundRecord | None = None  # that agent's last round

    # ---------------------------------------------------------------------------------------- planner side

    def show_request(self, request: PlanRequest, menu: Sequence[Choice]) -> None:
        print_ = self.console.print
        print_()
        print_(f"[bold]Round {request.round_index} of {request.max_rounds}[/bold]"
               + (f"  {escape(self.task_id)}" if self.task_id else "") + f"  (you are the {self.role})")
        print_(f"[bold]Task:[/bold] {escape(request.task)}", soft_wrap=True)
        self._show_views(request)
        if request.round_index > 1:
            feedback = "none (your last subtask ran without an error)" if is_nothing(request.feedback) else \
                request.feedback
            print_(f"[bold]Last feedback:[/bold] {escape(feedback)}", soft_wrap=True)
        state = request.world_state
        if state is not None:
            print_(escape(where_line(state)))
            for line in other_agents_lines(state, self.role):
                print_(escape(line), soft_wrap=True)
        if self.other is not None:
            last = last_round_line(self.other_last) if self.other_last is not None else "none yet"
            print_(f"[bold]The {self.other}'s last round:[/bold] {escape(last)}", soft_wrap=True)
        if state is not None:
            print_("[bold]Objects:[/bold]")
            for line in describe_objects(state, "Clean" in request.actions):
                print_("  " + escape(line))
        self.show_menu(menu)
        print_("Type a subtask such as [Go to, fridge], a number from the list, look, help or quit.")

    def _show_views(self, request: PlanRequest) -> None:
        if not request.images:
            self.console.print("Views: none (the episode does not render)")
            return
        image = mosaic(request.images)
        if self.views_dir is not None:
            path = self.views_dir / f"round{request.round_index:02d}_views.png"
            Image.fromarray(image).save(path)
            self.saved.append(path)
            # soft_wrap: a path (and any one-line message below) stays one line, for the terminal to fold.
            self.console.print(f"[bold]Views[/bold] (front, left / back, right): {escape(str(path))}", soft_wrap=True)
        if self.preview:
            self.console.print(half_block_preview(image), end="")

    def show_menu(self, menu: Sequence[Choice]) -> None:
        if not menu:
            return
        self.console.print("[bold]Admissible subtasks:[/bold]")
        width = max(len(c.subtask.text()) for c in menu) + len(str(len(menu))) + 3
        per_line = max(1, (self.console.width - 2) // (width + 2))
        for start in range(0, len(menu), per_line):
            cells = [f"{i + 1:>{len(str(len(menu)))}} {menu[i].subtask.text()}".ljust(width)
                     for i in range(start, min(start + per_line, len(menu)))]
            self.console.print("  " + escape("  ".join(cells).rstrip()), highlight=False)

    def show_world(self, request: PlanRequest) -> None:
        state = request.world_state
        if state is None:
            self.console.print("No world description this round.")
            return
        self.console.print("[bold]Furniture by room:[/bold]")
        for line in describe_furniture(state):
            self.console.print("  " + escape(line), highlight=False)
        self.console.print("[bold]Objects:[/bold]")
        for line in describe_objects(state, "Clean" in request.actions):
            self.console.print("  " + escape(line), highlight=False)

    def show_help(self, request: PlanRequest) -> None:
        self.console.print(escape(HELP_TEXT), highlight=False)
        self.console.print(f"This task's actions: {escape(', '.join(request.actions))}; "
                           f"models: {escape(', '.join(request.models))}")

    def refuse(self, message: str) -> None:
        self.console.print(f"[yellow]{escape(message)}[/yellow]", highlight=False, soft_wrap=True)

    def prompt(self) -> None:
        self.console.print("> ", end="")
        self.console.file.flush()

    # ---------------------------------------------------------------------------------------- observer side

    def on_round(self, record: RoundRecord, seen: object, state: WorldState) -> None:
        """A round of the loop's first agent: the person's when they play the robot, else the robot's."""
        if self.other is None:
            self._print_round(record, "")
        else:
            self.other_last = record
            self._print_round(record, f"{self.other}: ")

    def on_partner_round(self, record: RoundRecord, seen: object, state: WorldState) -> None:
        """A round of the second agent of a two-agent episode: the person's when they play the human."""
        self._print_round(record, "you: " if self.other is not None else "partner: ")

    def _print_round(self, record: RoundRecord, who: str) -> None:
        style = "green" if record.feedback.success else "yellow"
        line = who + last_round_line(record)
        self.console.print(f"[{style}]{escape(line)}[/{style}]", highlight=False, soft_wrap=True)
