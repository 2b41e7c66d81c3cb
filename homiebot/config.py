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


class NoiseMode(str, enum.Enum):
    """Skill execution noise on the command lines (``--noise``); presets in :mod:`homiebot.skills.noise`."""

    OFF = "off"  # the noiseless preset
    EMMOE = "emmoe"  # EMMOE table 4's per-try success rates


class PerceptionMode(str, enum.Enum):
    """What the planner's world knowledge comes from (``--perception``; :mod:`homiebot.perception`)."""

    OFF = "off"  # the views' instance segmentation only
    PRIVILEGED = "privileged"  # PARTNR's privileged, partially observed world graph
    CONCEPTGRAPH = "conceptgraph"  # a world graph built from depth and masks


#: The world-graph builders (every perception mode but off).
GRAPH_BUILDERS: tuple[str, ...] = tuple(m.value for m in PerceptionMode if m is not PerceptionMode.OFF)


def choices(enum_type: type[enum.Enum]) -> str:
    """The values of a choice enum as a reader lists them: ``off, privileged or conceptgraph``."""
    values = [str(member.value) for member in enum_type]
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


def perception_mode(value: str, *, what: str = "--perception") -> PerceptionMode:
    """``value`` as a :class:`PerceptionMode`; ``ValueError`` with one line naming ``what`` and the choices."""
    try:
        return PerceptionMode(value)
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; choose {choices(PerceptionMode)}") from None
