"""Core data types shared by every part of HomieBot.

These are the ROS-agnostic twins of the ``homie_msgs`` contract (``msgs/``). The ROS 2 layer
converts between them and the messages in ``homiebot/ros/``; nothing else defines a copy.

Names and strings follow the EMMOE paper (appendices D and E) exactly, because the
planner models are trained on them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: The action list of the EMMOE system prompt (appendix D), in the paper's order.
EMMOE_ACTIONS: tuple[str, ...] = ("Go to", "Pick", "Put", "Open", "Close", "End")
#: EMMOE's list extended with the household skills ALFWorld's task types need (switching appliances and lamps,
#: cleaning, heating, cooling; declared in ``homiebot/skills/actions.py``, see docs/textworld.md) and PARTNR's Fill and
#: Pour (docs/collaboration.md). ``End`` stays last.
HOUSEHOLD_ACTIONS: tuple[str, ...] = EMMOE_ACTIONS[:-1] + ("Turn on", "Turn off", "Clean", "Heat", "Cool", "Fill", "Pour", "End")
#: The model list of the EMMOE system prompt (appendix D), in the paper's order.
EMMOE_MODELS: tuple[str, ...] = ("NoMaD", "PixNav", "octo", "RT-1-X")
#: The order of the four first-person views everywhere (system prompt item 1; file names of appendix B).
VIEW_NAMES: tuple[str, ...] = ("front", "left", "back", "right")


def casefold_words(text: str) -> str:
    """Lower-case with single spaces, trimmed: the one normal form for comparing actions, commands and names
    that differ only in case or spacing (``"Go  To"`` -> ``"go to"``). Grounding's
    :func:`homiebot.perception.grounding.normalize_name` builds on it for scene names."""
    return " ".join(text.strip().lower().split())


class Action(str, enum.Enum):
    GO_TO = "Go to"
    PICK = "Pick"
    PUT = "Put"
    OPEN = "Open"
    CLOSE = "Close"
    TURN_ON = "Turn on"
    TURN_OFF = "Turn off"
    CLEAN = "Clean"
    HEAT = "Heat"
    COOL = "Cool"
    # PARTNR's liquid skills (appendix A.9.1: Fill, Pour; the human's only): fill a held container at a faucet,
    # pour the held container's contents into another container.
    FILL = "Fill"
    POUR = "Pour"
    END = "End"

    @classmethod
    def parse(cls, text: str) -> Action | None:
        """Case- and space-insensitive lookup ("go to", "Go  To", "pick"); None when not an action."""
        key = casefold_words(text)
        for action in cls:
            if action.value.lower() == key:
                return action
        return None


class ErrorCode(str, enum.Enum):
    """EMMOE error taxonomy (section 3.3, appendix E.4), plus OK for success."""

    OK = "OK"
    L1 = "L1"  # hand full but pick/open/close
    L2 = "L2"  # hand empty but put
    L3 = "L3"  # put into a closed container
    L4 = "L4"  # open/close a non-interactive object
    D1 = "D1"  # farther than 2 m
    D2 = "D2"  # closer than 0.1 m
    F1 = "F1"  # action or model not in the lists (and unparseable output)
    F2 = "F2"  # target not in the scene / not recognisable
    E1 = "E1"  # failed three tries: too difficult
    E2 = "E2"  # put failed and the object left the hand: object missing

    @property
    def family(self) -> str:
        """L, D, F, E or OK: the four primary types of tables H3-H6."""
        return "OK" if self is ErrorCode.OK else self.value[0]


@dataclass(frozen=True)
class Subtask:
    """One subtask as the planner wrote it: ``[action, target(, place)]``.

    Fields are the raw strings (stripped), not validated: validation is the executor's job,
    because an invalid action must come back as F1 feedback, not as an exception.
    """

    action: str
    target: str | None = None
    place: str | None = None

    def text(self) -> str:
        """The bracketed EMMOE form: ``[Go to, fridge]``, ``[Put, apple, fridge]``, ``[End]``."""
        parts = [self.action] + [p for p in (self.target, self.place) if p is not None]
        return "[" + ", ".join(parts) + "]"

    @property
    def is_end(self) -> bool:
        return Action.parse(self.action) is Action.END


@dataclass(frozen=True)
class PlannerOutput:
    """A planner's answer, parsed. ``subtask`` is None when the text could not be parsed."""

    raw: str
    analysis: str = ""
    subtask: Subtask | None = None
    model: str = ""
    parse_error: str | None = None


@dataclass(frozen=True)
class Feedback:
    """What the executor reports after a subtask. ``message`` is EMMOE's text: "None" on success."""

    code: ErrorCode
    message: str
    inventory: tuple[str, ...] = ()
    attempts: int = 0

    @property
    def success(self) -> bool:
        return self.code is ErrorCode.OK

    @property
    def signal(self) -> str:
        """EMMOE's execution signal: ``success`` or ``fail``."""
        return "success" if self.success else "fail"


def update_inventory(inventory: Sequence[str], subtask: Subtask | None, code: ErrorCode) -> tuple[str, ...]:
    """EMMOE appendix D's ``update_inventory`` on a parsed subtask and the executor's error code.

    The rule both sides of the loop apply: the planner's session keeps its inventory with it, and the executor
    reports the inventory after a subtask with it, so both ends agree by construction without either importing
    the other. The decisions where the paper's code is loose are in :mod:`homiebot.planner.conversation`.
    """
    items = list(inventory)
    if subtask is None:
        return tuple(items)
    action = Action.parse(subtask.action)
    if code is ErrorCode.OK:
        if action is Action.PICK and subtask.target:
            items.append(subtask.target.strip().lower())
        elif action is Action.PUT and items:
            items.pop()
    elif code is ErrorCode.E2 and action is Action.PUT and items:
        items.pop()
    return tuple(items)


@dataclass(frozen=True)
class Pose2D:
    """Planar robot pose in the ``map`` frame (REP 103: x forward, y left, yaw counter-clockwise)."""

    x: float
    y: float
    yaw: float

    def distance_to(self, other: Pose2D) -> float:
        return math.hypot(self.x - other.x, self.y - other.y)


@dataclass
class CameraView:
    """One first-person view. Depth in metres along the optical axis; segmentation holds instance ids
    (0 = nothing named) that :attr:`Observation.instance_names` maps to scene instance names.

    ``camera_to_world`` is a 4x4 transform of the optical frame (x right, y down, z forward).
    """

    name: str
    rgb: NDArray[Any]  # (H, W, 3) uint8
    depth: NDArray[Any]  # (H, W) float32, metres
    segmentation: NDArray[Any]  # (H, W) int32 instance ids
    fx: float
    fy: float
    cx: float
    cy: float
    camera_to_world: NDArray[Any]  # (4, 4) float64


@dataclass
class MotionFrame:
    """One moment of a physical skill's motion, seen by the reaching views (homiebot/sim/mujoco/motion_views.py):
    ``views`` by camera (``head``, ``overview``), RGB only (empty depth and segmentation); ``stamp`` the simulated
    time (s); ``label`` what had just happened ("arm at its goal", "gripper closed on apple_1")."""

    stamp: float
    label: str
    views: dict[str, CameraView]


@dataclass
class Observation:
    """The four views plus the robot's proprioception at one instant."""

    views: dict[str, CameraView]  # keyed by VIEW_NAMES, in that order
    instance_names: dict[int, str]
    robot_pose: Pose2D
    held_object: str | None = None
    sim_time: float = 0.0

    def images(self) -> list[NDArray[Any]]:
        """The RGB images in the planner's order: front, left, back, right."""
        return [self.views[name].rgb for name in VIEW_NAMES if name in self.views]

    def visible_instances(self, min_pixels: int = 1) -> list[str]:
        """Instance names with at least ``min_pixels`` pixels in any one view's segmentation, sorted."""
        counts: dict[int, int] = {}
        for view in self.views.values():
            ids, n = np.unique(view.segmentation, return_counts=True)
            for instance_id, count in zip(ids.tolist(), n.tolist(), strict=False):
                counts[instance_id] = max(counts.get(instance_id, 0), count)
        return sorted(
            {
                self.instance_names[i]
                for i, count in counts.items()
                if i != 0 and count >= min_pixels and i in self.instance_names
            }
        )


class EntityKind(str, enum.Enum):
    ROOM = "room"
    FURNITURE = "furniture"
    OBJECT = "object"


@dataclass(frozen=True)
class EntityState:
    """Privileged ground truth about one named thing in the world."""

    name: str
    category: str
    kind: EntityKind
    aliases: tuple[str, ...]
    position: tuple[float, float, float]
    bbox_min: tuple[float, float, float]
    bbox_max: tuple[float, float, float]
    room: str | None = None
    parent: str | None = None  # receptacle an object is on/in; None when held or on the floor
    relation: str | None = None  # "on" | "in" | None
    articulated: bool = False
    interactive: bool = False
    is_open: bool | None = None  # None when not articulated
    held: bool = False
    color: str | None = None
    appliance: bool = False
    powered_on: bool | None = None  # None when not an appliance
    level: int = 0  # storey (0 ground floor)
    # What a furniture does to what is held at it ("heat", "cool", "clean", "light"; docs/textworld.md).
    functions: tuple[str, ...] = ()
    # Object states of ALFWorld's task types (isClean, isHot, isCool); None for rooms and furniture.
    is_clean: bool | None = None
    is_hot: bool | None = None
    is_cold: bool | None = None
    # PARTNR's is_filled / is_empty: whether a container (cup, mug, bowl) holds water; None when the object
    # holds no liquid, and for rooms and furniture.
    is_filled: bool | None = None
    # The box (world frame, axis-aligned) that objects are put "in" for a furniture with an interior (a fridge,
    # a drawer as it is now, pulled out or not, a sink basin): the physical Put aims into it. A semantic map's
    # annotation, as the bounding box is; None for rooms, objects and furniture without an interior.
    interior_min: tuple[float, float, float] | None = None
    interior_max: tuple[float, float, float] | None = None
    # An object's own box, which the axis-aligned bbox above only bounds: its half extents in its own frame (x along
    # ``yaw``, y across, z up) and its heading (rad about z, world frame). ``yaw`` None with half extents given: the
    # object is round about z (a can, a fruit; x is its radius), so every heading is alike. Both None: unknown
    # (rooms, furniture, a world graph from images or from a message that does not carry them); a grasp planner
    # then knows the bbox alone.
    half_extents: tuple[float, float, float] | None = None
    yaw: float | None = None
    # An open, hollow object (a bowl): the thickness of its wall and floor (m), from the scene's declaration; a
    # two-finger gripper may take it by the rim when it is too wide to take across. None: solid or unknown.
    wall_thickness: float | None = None


@dataclass(frozen=True)
class AgentState:
    """One agent of a two-agent (robot + human, PARTNR) world: its id (0 robot, 1 human), pose and hand."""

    role: int
    name: str
    pose: Pose2D
    radius: float
    held: str | None = None
    room: str | None = None


@dataclass(frozen=True)
class WorldState:
    """Privileged snapshot of the simulator: what an oracle skill or the expert planner may read.

    In a two-agent world ``robot`` / ``robot_radius`` / ``held`` / ``robot_room`` are the agent whose point of
    view the state is taken from (the one acting), and ``agents`` lists every agent, robot first; ``agents``
    is empty in a single-agent world."""

    robot: Pose2D
    robot_radius: float
    held: str | None
    entities: dict[str, EntityState] = field(default_factory=dict)
    scene: str = ""
    robot_room: str | None = None  # room whose floor polygon contains the robot
    agents: tuple[AgentState, ...] = ()

    def reach_distance(self, name: str) -> float:
        """Horizontal gap between the robot's base footprint (a circle) and the entity's footprint
        (its axis-aligned box): 0 when they touch or overlap.

        This is the "distance" of EMMOE's D1 (> 2 m) and D2 (< 0.1 m) checks. The paper measures it in
        Habitat without saying between which points; measuring surface to surface makes both
        thresholds meaningful for a robot with a 0.3 m base radius.
        """
        entity = self.entities[name]
        dx = max(entity.bbox_min[0] - self.robot.x, 0.0, self.robot.x - entity.bbox_max[0])
        dy = max(entity.bbox_min[1] - self.robot.y, 0.0, self.robot.y - entity.bbox_max[1])
        return max(math.hypot(dx, dy) - self.robot_radius, 0.0)

    def objects_in(self, receptacle: str) -> list[str]:
        return sorted(e.name for e in self.entities.values() if e.parent == receptacle)


class SkillStatus(str, enum.Enum):
    """Physical outcome of one oracle-skill attempt (issue: embedded simulator, item 6)."""

    SUCCESS = "success"
    TOO_FAR = "too_far"
    TOO_CLOSE = "too_close"
    CONTAINER_CLOSED = "container_closed"
    NOT_INTERACTIVE = "not_interactive"
    HAND_FULL = "hand_full"
    HAND_EMPTY = "hand_empty"
    NOT_FOUND = "not_found"
    NO_PATH = "no_path"  # navigation found no collision-free path
    EXECUTION_FAILED = "execution_failed"  # the skill tried and failed (noise, grasp miss)
    DROPPED = "dropped"  # a put failed and the object left the hand: EMMOE's "object is missing"


@dataclass(frozen=True)
class SkillResult:
    status: SkillStatus
    detail: str = ""
    path_length: float = 0.0
    # False: the failure is a property of what the skill acts on, not of chance or of where the robot stands (a
    # bowl too wide for the gripper, with a rim too thin to hold): the same try again fails the same way, so the
    # executor does not spend its further tries on it (homiebot/executor/executor.py).
    retryable: bool = True
    # A Put's: where the object's centre was when the hand let go of it (map frame, m), as the arm's own joints and
    # the grasp tell; None when the skill does not know (the oracle's). Perception places the object there until a
    # view shows it (homiebot/perception/actions.py).
    released_at: tuple[float, float, float] | None = None

    @property
    def success(self) -> bool:
        return self.status is SkillStatus.SUCCESS


@dataclass(frozen=True)
class SentMessage:
    """One chat turn exactly as a planner sent it to its model: the role (``system``, ``user``, ``assistant``), the
    text, and the images it carried in their order, named by the view they are (``front``, ``left``, ``back``,
    ``right``; a record names them by their files, ``subtask3_front.png``)."""

    role: str
    text: str
    images: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelCall:
    """One call of a planner to its model: every message it sent, in order (the system turn, earlier turns, the
    world description and instruction as the planner wrote them), and the model's answer as the planner kept it."""

    messages: tuple[SentMessage, ...]
    answer: str


@dataclass
class RoundRecord:
    """One round of an episode: what the planner saw and said, and what the executor answered."""

    index: int  # 1-based, as EMMOE numbers subtasks
    instruction: str
    output: PlannerOutput
    feedback: Feedback
    inventory_before: tuple[str, ...] = ()
    path_length: float = 0.0  # metres the base travelled in this round
    timings: dict[str, float] = field(default_factory=dict)  # seconds: plan, execute, render, ...
    # The subtask in simulator instance names as the executor grounded it through a world graph, whose names are
    # perception's own ("fridge_1"); TP reads this one then (homiebot.eval.keypaths.steps_of). None without a
    # world graph (the planner's words are the scene's names) and for rounds that grounded nothing.
    grounded: Subtask | None = None
    # The world description sent with this round's prompt (PARTNR-style text, --describe-world), exactly as the
    # planner received it; None when none was sent. Recorded so that a record holds every input of the round.
    world_description: str | None = None
    # Which agent took the round in a two-agent episode (0 robot, 1 human: PARTNR's ids).
    agent: int = 0
    # The planner's calls to its model for this round's answer, exactly as sent (PlanRequest.model_calls): the model
    # input of the round. Empty for a planner that asks no model (the expert), a round it answered without one, and
    # records written before these were kept.
    model_calls: tuple[ModelCall, ...] = ()

    @property
    def subtask_text(self) -> str:
        """The bracketed subtask, or the raw first line when the output could not be parsed."""
        if self.output.subtask is not None:
            return self.output.subtask.text()
        return "[" + (self.output.raw.strip().splitlines() or [""])[0][:80] + "]"


@dataclass
class Trajectory:
    """A whole episode, as the loop returns it and the record stores it; metrics are computed from this."""

    task_id: str | None
    instruction: str
    scene: str
    seed: int
    planner: str
    rounds: list[RoundRecord] = field(default_factory=list)
    ended: bool = False  # the planner output [End]
    goal_satisfied: bool | None = None  # final-state goal check (None for free-text tasks)
    path_length: float = 0.0
    wall_time_s: float = 0.0
    error: str | None = None  # an infrastructure failure that stopped the episode (not a planner error)
    stopped: str | None = None  # why a planner stopped the episode cleanly (a person quit): not a failure
    # What the loop knew at the end, for the record: furniture seen open in any observed state (``inspected``
    # goals), the system prompt and EMMOE appendix D's conversation log.
    opened: list[str] = field(default_factory=list)
    system_prompt: str | None = None
    conversation: list[str] | None = None
    # The human partner's rounds in a two-agent episode (``rounds`` stays the robot's), in lock-step with them.
    partner_rounds: list[RoundRecord] = field(default_factory=list)
    partner_planner: str | None = None
