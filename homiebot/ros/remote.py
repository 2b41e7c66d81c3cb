"""Simulator-protocol proxies over the graph, so that the executor node runs the core's own Executor.

:class:`RemoteSimulator` implements the part of :class:`homiebot.sim.base.Simulator` that
:class:`homiebot.executor.executor.Executor` uses: ``state()`` is the sim bridge's ``GetWorldState`` service;
``go_to`` goes over the ``Navigate`` action to the navigation executor, ``pick`` / ``put`` / ``open`` /
``close`` over ``Manipulate`` to the manipulation executor; both forward to the sim bridge. The error
checks and the three tries stay in the core.

:class:`RemoteSkills` is the executor's skill runner over that proxy: it knows which model serves which action
(the skill layer's table, :class:`homiebot.skills.SkillSet`), so the core Executor substitutes a serving model
exactly as in-process, and every attempt's goal carries the model the skill layer runs. The skill layer with
its execution noise runs on the robot side (the sim bridge's ``noise`` parameter).

``reset_arm()`` is deferred: it sets a flag that the next skill goal carries (``reset_arm_first``), which
saves two action round trips per try. It is flushed as an explicit ``RESET_ARM`` goal when anything reads
the state first, so every sequence of calls the executor can make sees the same world as in-process.

``state()`` is asked of the bridge only when the proxy does not hold the current state. Within one subtask
(between :meth:`RemoteSimulator.begin_subtask` and the next) it does: it starts from the state the goal
carried (the planner's, current when sent) or the first one fetched, and every skill result carries the
state after the skill. Only this executor acts on the world while a subtask runs (the robot has one body and
the executor runs one subtask at a time), so that state stays current until the next skill. The cache is
dropped at every new subtask, so a reset or another actor between subtasks is never missed unless the
planner itself sends a stale state.

Calls made here block the calling thread; run them from a reentrant callback group of a multi-threaded
executor or from a thread that does not spin (see :mod:`homiebot.ros.calls`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from homie_msgs.action import Manipulate, Navigate
from homie_msgs.msg import WorldState as WorldStateMsg
from homie_msgs.srv import GetWorldState, ResolveTarget
from rclpy.action import ActionClient
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from homiebot.perception.grounding import GroundingResult
from homiebot.ros import convert
from homiebot.ros.calls import call_action, call_service
from homiebot.skills import SkillSet
from homiebot.types import Action, Observation, SkillResult, WorldState

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
        self._current: tuple[WorldStateMsg, WorldState] | None = None  # the state now, while a subtask runs

    def begin_subtask(self, model: str, on_phase: PhaseCallback | None = None, state: WorldStateMsg | None = None) -> None:
        """Start a subtask; ``state`` is the goal's world state (``state_sequence`` 0 = not given)."""
        self.model = model
        self.on_phase = on_phase
        self._attempt = 0
        self._current = None
        if state is not None and state.state_sequence > 0:
            self._remember(state)

    def current_state_msg(self) -> WorldStateMsg:
        """The world state now as a message (for the subtask's result), fetched only if not held."""
        self.state()
        assert self._current is not None
        return self._current[0]

    # ------------------------------------------------------------------------------------ protocol

    def state(self) -> WorldState:
        self._flush_arm_reset()
        if self._current is None:
            response = call_service(self._state_client, GetWorldState.Request(), self.timeouts.state_s)
            self._remember(response.state)
        assert self._current is not None
        return self._current[1]

    def reset_arm(self) -> None:
        self._arm_reset_pending = True
        self._attempt += 1

    def go_to(self, target: str) -> SkillResult:
        goal = Navigate.Goal(target=target, model=self.model, reset_arm_first=self._take_arm_reset())
        self._phase("navigating")
        return self._run_skill(self._navigate, goal)

    def pick(self, obj: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.PICK, obj)

    def put(self, obj: str, place: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.PUT, obj, place)

    def open(self, target: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.OPEN, target)

    def close(self, target: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.CLOSE, target)

    # The household skills (homiebot.sim.base.SupportsHouseholdSkills): PARTNR-style tasks switch and clean.
    def turn_on(self, target: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.TURN_ON, target)

    def turn_off(self, target: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.TURN_OFF, target)

    def clean(self, obj: str, place: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.CLEAN, obj, place)

    def heat(self, obj: str, place: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.HEAT, obj, place)

    def cool(self, obj: str, place: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.COOL, obj, place)

    # PARTNR's liquid skills (homiebot.sim.base.SupportsLiquids): the human's Fill and Pour.
    def fill(self, obj: str, place: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.FILL, obj, place)

    def pour(self, obj: str, place: str) -> SkillResult:
        return self._manipulation(Manipulate.Goal.POUR, obj, place)

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

    def _remember(self, msg: WorldStateMsg) -> None:
        self._current = (msg, convert.world_state_from_msg(msg))

    def _run_skill(self, client: ActionClient, goal) -> SkillResult:
        """One skill goal; its result gives the outcome and the state after it (absent from an older robot side)."""
        self._current = None  # a skill changes the world, whatever its outcome (or a timeout) says
        result = call_action(client, goal, self.timeouts.skill_s)
        if result.state.state_sequence > 0:
            self._remember(result.state)
        return convert.skill_result_from_msg(result.result)

    def _take_arm_reset(self) -> bool:
        pending, self._arm_reset_pending = self._arm_reset_pending, False
        return pending

    def _flush_arm_reset(self) -> None:
        if self._arm_reset_pending:
            self._arm_reset_pending = False
            goal = Manipulate.Goal(operation=Manipulate.Goal.RESET_ARM, model=self.model)
            self._run_skill(self._manipulate, goal)

    def _manipulation(self, operation: int, obj: str, place: str = "") -> SkillResult:
        goal = Manipulate.Goal(operation=operation, object=obj, place=place, model=self.model, reset_arm_first=self._take_arm_reset())
        self._phase("manipulating")
        return self._run_skill(self._manipulate, goal)

    def _phase(self, phase: str) -> None:
        if self.on_phase is not None:
            self.on_phase(phase if self._attempt <= 1 else "retrying", max(self._attempt, 1))


class RemoteSkills:
    """The executor's :class:`~homiebot.executor.executor.SkillRunner` in the graph.

    In-process the executor runs a :class:`homiebot.skills.SkillSet`; its ``serves`` / ``models_for`` make the
    lenient executor hand the skill layer a model that serves the action when the planner's listed model does
    not (``Executor._serving_model``: ``[Open, fridge]`` with NoMaD runs with octo). This runner answers those
    questions from the same table and sends each attempt as one skill goal that carries the model chosen, so
    the robot side (the sim bridge's SkillSet, with its noise) runs the same model for the same attempt. The
    noise itself is not drawn here: this side's SkillSet is noiseless and only dispatches to the proxy.
    """

    def __init__(self, sim: RemoteSimulator) -> None:
        self.sim = sim
        self._skills = SkillSet(sim, noise=None)

    def serves(self, action: Action, model: str) -> bool:
        return self._skills.serves(action, model)

    def models_for(self, action: Action) -> tuple[str, ...]:
        return self._skills.models_for(action)

    def run(self, action: Action, model: str, target: str, place: str | None = None) -> SkillResult:
        self.sim.model = model  # the next skill goal carries it
        return self._skills.run(action, model, target, place)


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
