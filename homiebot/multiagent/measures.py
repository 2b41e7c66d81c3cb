"""PARTNR's collaboration measures over a two-agent episode (paper §4.2.2 and appendix A.12; exact rules
from its analysis code as the spec gives them): task offloading and extraneous effort over both agents.

Input: the episode's agent actions in execution order, each with PARTNR's percent complete (PC) measured
right after it. With lock-step rounds the two agents' actions of one round run one after the other (robot
first), and the state is evaluated after each, so every rise of PC is credited to exactly one agent.

* a **progress event** is an action after which PC exceeds its running maximum (from PC at the start);
* **task offloading** = robot progress events / all progress events, on successful episodes only
  (final PC >= 0.99); PARTNR: "ideally ... should approach 0.5";
* **extraneous effort** = (events - progress events) / events, where events are the progress events plus
  the successful placements that did not raise PC; successful episodes only.

``None`` means "not defined for this episode" (failed, or no progress at all), never 0 in its place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from homiebot.multiagent.centralized import AgentRole

#: PARTNR's analysis keeps episodes whose final PC is at least this.
SUCCESS_PC = 0.99


@dataclass(frozen=True)
class AgentEvent:
    """One executed action of one agent: whether it succeeded, whether it was a placement, PC after it."""

    agent: AgentRole
    pc_after: float
    succeeded: bool = True
    is_place: bool = False


@dataclass(frozen=True)
class CollaborationMeasures:
    progress: dict[AgentRole, int]
    actions: dict[AgentRole, int]  # successful actions per agent
    task_offloading: float | None
    extraneous_effort: float | None


def progress_flags(events: Sequence[AgentEvent], initial_pc: float = 0.0) -> list[bool]:
    """For each event, whether it raised PC above the running maximum."""
    best = initial_pc
    flags = []
    for event in events:
        raised = event.pc_after > best
        flags.append(raised)
        best = max(best, event.pc_after)
    return flags


def collaboration_measures(events: Sequence[AgentEvent], initial_pc: float = 0.0) -> CollaborationMeasures:
    flags = progress_flags(events, initial_pc)
    progress = {role: 0 for role in AgentRole}
    actions = {role: 0 for role in AgentRole}
    extraneous_places = 0
    for event, raised in zip(events, flags, strict=True):
        if event.succeeded:
            actions[event.agent] += 1
        if raised:
            progress[event.agent] += 1
        elif event.is_place and event.succeeded:
            extraneous_places += 1
    final_pc = max([initial_pc, *(e.pc_after for e in events)]) if events else initial_pc
    last_pc = events[-1].pc_after if events else initial_pc
    total_progress = sum(progress.values())
    if last_pc < SUCCESS_PC or final_pc < SUCCESS_PC or total_progress == 0:
        return CollaborationMeasures(progress, actions, None, None)
    offloading = progress[AgentRole.ROBOT] / total_progress
    extraneous = extraneous_places / (total_progress + extraneous_places)
    return CollaborationMeasures(progress, actions, offloading, extraneous)
