"""The defaults and the choices every configuration of HomieBot shares, written once.

The episode loop's :class:`~homiebot.agent.loop.EpisodeConfig`, the executor's
:class:`~homiebot.executor.executor.ExecutorConfig`, the expert planner, the ROS 2 nodes' parameters and the
command lines take their defaults from here, and compare choices with these enums (a ``str`` enum equals its
value, so ``"privileged" == PerceptionMode.PRIVILEGED`` and YAML or command-line strings need no conversion).

The EMMOE values ("EMMOE: A Comprehensive Benchmark for Embodied Mobile Manipulation in Open Environments"):
20 rounds per episode and a window of 3 rounds of conversation (appendix D), 3 tries per subtask and the
reach thresholds of the D1 / D2 checks (appendix E.1).

Configuration classes: new ones are frozen dataclasses (checked by mypy, no validation cost in the loop's
hot path, no dependency in the ROS 2 nodes); pydantic models stay where input arrives as text and must be
validated with a precise error (task suites, evaluation settings, perception options from YAML or a command
line). docs/architecture.md, "Configuration".
"""

from __future__ import annotations

import enum
from typing import TypeVar

#: Rounds per episode before the loop stops (EMMOE appendix D).
MAX_ROUNDS = 20
#: Earlier rounds of the conversation a planner is shown (EMMOE appendix D).
HISTORY_WINDOW = 3
#: Tries of one subtask before E1 (EMMOE appendix E.1).
MAX_TRIES = 3
#: D1: the target is farther than this (metres, reach distance; EMMOE appendix E.1).
FAR_THRESHOLD_M = 2.0
#: D2: the target is closer than this (metres, reach distance; EMMOE appendix E.1).
NEAR_THRESHOLD_M = 0.1


class Choice(str, enum.Enum):
    """A choice whose members read as their values in ``str()`` and f-strings (Python 3.11's ``enum.StrEnum``
    does this; this project still supports 3.10, where a ``str`` enum formats as ``Class.MEMBER``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class NoiseMode(Choice):
    """Skill execution noise on the command lines (``--noise``); presets in :mod:`homiebot.skills.noise`."""

    OFF = "off"  # the noiseless preset
    EMMOE = "emmoe"  # EMMOE table 4's per-try success rates


class SkillsMode(Choice):
    """How the skills act (``--skills``; docs/robots.md "Physical skills")."""

    ORACLE = "oracle"  # the simulator places things (EMMOE's background-information setting, PARTNR's oracle skills)
    PHYSICAL = "physical"  # NavigateToPose, FollowJointTrajectory and GripperCommand goals under physics


class ArticulationMode(Choice):
    """How the physical skills open and close doors and drawers (``--articulation``; docs/robots.md "Physical
    skills: Open and Close through the arm")."""

    ORACLE = "oracle"  # the simulator sets the door's or drawer's joint to its end
    PHYSICAL = "physical"  # the arm moves the door or drawer by its handle or edge, under physics


class PerceptionMode(Choice):
    """What the planner's world knowledge comes from (``--perception``; :mod:`homiebot.perception`)."""

    OFF = "off"  # the views' instance segmentation only
    PRIVILEGED = "privileged"  # PARTNR's privileged, partially observed world graph
    CONCEPTGRAPH = "conceptgraph"  # a world graph built from depth and masks


class DecodeMode(Choice):
    """How a local model decodes a greedy answer (``--decode``; :mod:`homiebot.planner.hf_backend`, docs/models.md)."""

    AUTO = "auto"  # the fast loop on CUDA for the models it supports, transformers' generate otherwise
    FAST = "fast"  # homiebot.planner.fast_decode's greedy loop (Qwen2-VL family)
    GENERATE = "generate"  # transformers' generate


class AnswerFormat(Choice):
    """What a planner's answer holds (:mod:`homiebot.planner.prompt`; docs/models.md, "The subtask-only answer").

    ``analysis`` is EMMOE's trained format (appendix F.1): ``Analysis: ...``, ``Subtask: [...]``, ``Model: ...``.
    ``subtask`` leaves the Analysis line out, as PARTNR's finetuned planner emits actions without thoughts
    (PARTNR appendix A.10): a model trained on ``homie data build sft --thoughtless`` answers in about 12 tokens
    instead of about 44, which is what brings a planning round of SmolLM2-135M on one core under a second.
    """

    ANALYSIS = "analysis"
    SUBTASK = "subtask"


#: The world-graph builders (every perception mode but off).
GRAPH_BUILDERS: tuple[str, ...] = tuple(m.value for m in PerceptionMode if m is not PerceptionMode.OFF)


ChoiceT = TypeVar("ChoiceT", bound=Choice)


def choices(enum_type: type[enum.Enum]) -> str:
    """The values of a choice enum as a reader lists them: ``off, privileged or conceptgraph``."""
    values = [str(member.value) for member in enum_type]
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


def parse_choice(enum_type: type[ChoiceT], value: str, *, what: str) -> ChoiceT:
    """``value`` as a member of ``enum_type``; ``ValueError`` with one line naming ``what`` and the choices."""
    try:
        return enum_type(value)
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; choose {choices(enum_type)}") from None


def perception_mode(value: str, *, what: str = "--perception") -> PerceptionMode:
    """``value`` as a :class:`PerceptionMode` (``homie run`` / ``homie up`` / ``homie eval --perception``)."""
    return parse_choice(PerceptionMode, value, what=what)


def decode_mode(value: str, *, what: str = "--decode") -> DecodeMode:
    """``value`` as a :class:`DecodeMode` (``--decode`` of the command lines and the model server)."""
    return parse_choice(DecodeMode, value, what=what)
