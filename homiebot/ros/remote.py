"""Simulator-protocol proxies over the graph, so that the executor node runs the core's own Executor.

:class:`RemoteSimulator` implements the part of :class:`homiebot.sim.base.Simulator` that
:class:`homiebot.executor.executor.Executor` uses: ``state()`` is the sim bridge's ``GetWorldState`` service;
``go_to`` goes over the ``Navigate`` action to the navigation executor, ``pick`` / ``put`` / ``open`` /
``close`` over ``Manipulate`` to the manipulation executor; both forward to the sim bridge. The error
checks and the three tries stay in the core.

``reset_arm()`` is deferred: it sets a flag that the next skill goal carries (``reset_arm_first``), which
saves two action round trips per try. It is flushed as an explicit ``RESET_ARM`` goal when anything reads
the state first, so every sequence of calls the executor can make sees the same world as in-process.

Calls made here block the calling thread; run them from a reentrant callback group of a multi-threaded
executor or from a thread that does not spin (see :mod:`homiebot.ros.calls`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from homie_msgs.action import Manipulate, Navigate
from homie_msgs.srv import GetWorldState, ResolveTarget
from rclpy.action import ActionClient
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from homiebot.perception.grounding import GroundingResult
from homiebot.ros import convert
from homiebot.ros.calls import call_action, call_service
from homiebot.types import Observation, SkillResult, WorldState

log = logging.getLogger(__name__)

#: Called with (phase, attempt) whenever a skill goal is sent: the executor node turns it into action feedback.
PhaseCallback = Callable[[str, int], None]


@dataclass(frozen=True)
class RemoteTimeouts:
    state_s: float = 10.0
    skill_s: float = 120.0


class RemoteSimulator:
    """The executor's view of the simulator, over ROS 2 (see the module docstring)."""

    name = "remote"

    def __init__(
        self,
        node: Node,
        *,
        navigate_action: str = "/navigate",
        manipulate_action: str = "/manipulate",
        state_service: str = "/sim/get_world_state",
        timeouts: RemoteTimeouts | None = None,
        callback_group: CallbackGroup | None = None,
    ) -> None:
        self.node = node
        self.timeouts = timeouts or RemoteTimeouts()
        self._state_client = node.create_client(GetWorldState, state_service, callback_group=callback_group)
        self._navigate = ActionClient(node, Navigate, navigate_action, callback_group=callback_group)
        self._manipulate = ActionClient(node, Manipulate, manipulate_action, callback_group=callback_group)
        self._arm_reset_pending = False
        self.model = "oracle"  # the low-level model named in the current subtask (set by the executor node)
        self.on_phase: PhaseCallback | None = None
        self._attempt = 0

    def begin_subtask(self, model: str, on_phase: PhaseCallback | None = None) -> None:
        self.model = model
        self.on_phase = on_phase
        self._attempt = 0

    # ------------------------------------------------------------------------------------ protocol

    def state(self) -> WorldState:
        self._flush_arm_reset()
        response = call_service(self._state_client, GetWorldState.Request(), self.timeouts.state_s)
        return convert.world_state_from_msg(response.state)

    def reset_arm(self) -> None:
        self._arm_reset_pending = True
        self._attempt += 1

    def go_to(self, target: str) -> SkillResult:
        goal = Navigate.Goal(target=target, model=self.model, reset_arm_first=self._take_arm_reset())
        self._phase("navigating")
        return convert.skill_result_from_msg(call_action(self._navigate, goal, self.timeouts.skill_s).result)

    def pick(self, obj: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.PICK, obj)

    def put(self, obj: str, place: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.PUT, obj, place)

    def open(self, target: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.OPEN, target)

    def close(self, target: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.CLOSE, target)

    def observe(self) -> Observation:
        raise NotImplementedError("the executor does not render; views come from the sim bridge's topics")

    def reset(self, scene, seed: int = 0):
        raise NotImplementedError("episodes are reset by the planner node through /sim/reset")

    def scene_spec(self):
        raise NotImplementedError("the scene description is on /sim/scene_description")

    def render_topdown(self, size: int = 512):
        raise NotImplementedError("no top-down map over the graph")

    def shutdown(self) -> None:
        self._navigate.destroy()
        self._manipulate.destroy()

    # ------------------------------------------------------------------------------------ helpers

    def _take_arm_reset(self) -> bool:
        pending, self._arm_reset_pending = self._arm_reset_pending, False
        return pending

    def _flush_arm_reset(self) -> None:
        if self._arm_reset_pending:
            self._arm_reset_pending = False
            goal = Manipulate.Goal(operation=Manipulate.Goal.RESET_ARM, model=self.model)
            call_action(self._manipulate, goal, self.timeouts.skill_s)

    def _manipulation(self, operation: int, obj: str, place: str = "") -> SkillResult:
        goal = Manipulate.Goal(operation=operation, object=obj, place=place, model=self.model, reset_arm_first=self._take_arm_reset())
        self._phase("manipulating")
        return convert.skill_result_from_msg(call_action(self._manipulate, goal, self.timeouts.skill_s).result)

    def _phase(self, phase: str) -> None:
        if self.on_phase is not None:
            self.on_phase(phase if self._attempt <= 1 else "retrying", max(self._attempt, 1))


class ServiceGrounder:
    """A :class:`~homiebot.perception.grounding.Grounder` that asks the perception node (``ResolveTarget``):
    grounding against what perception knows instead of the simulator's ground truth."""

    def __init__(self, node: Node, service: str = "/perception/resolve_target", timeout_s: float = 10.0,
                 callback_group: CallbackGroup | None = None) -> None:
        self._client = node.create_client(ResolveTarget, service, callback_group=callback_group)
        self.timeout_s = timeout_s

    def ground(self, target: str, state: WorldState) -> GroundingResult:
        response = call_service(self._client, ResolveTarget.Request(name=target), self.timeout_s)
        if not response.found:
            return GroundingResult(None, 0.0, "none", tuple(response.candidates))
        return GroundingResult(response.instance, float(response.score), response.method, tuple(response.candidates))
