"""The episode loop's in-process backend: the simulator, the executor and the skill layer in this process.

:class:`InProcessBackend` is what :func:`homiebot.agent.loop.run_episode` runs the loop over; the ROS 2
planner node runs the same loop over its clients of the sim bridge and the executor node
(``ros2_ws/src/planner_node``). Both give the loop the same answers for the same task and seed.

It keeps what it already knows, as the graph backend does: the state it last read goes to the executor's
checks (nothing acted on the world since), and the views the reset rendered are the first round's.

Two agents (PARTNR's robot and human, docs/collaboration.md): over a simulator that has them
(``MujocoSimulator(human=True)``), ``execute``/``state``/``observe``/``render`` take ``agent=`` (0 robot, 1 human);
agent 1's executor and skill layer run over ``sim.agent(1)`` (its base, hand and reach) with its own
:class:`ExecutorConfig` (``agent_configs``: its action list); ``begin_round()`` syncs the agents' clocks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from numpy.typing import NDArray

from homiebot.agent.loop import ExecutionOutcome
from homiebot.executor.executor import Executor, ExecutorConfig, SkillRunner
from homiebot.perception.grounding import Grounder
from homiebot.sim.base import Simulator, SupportsAgents, SupportsHeadLook
from homiebot.sim.scene import SceneSpec
from homiebot.skills import SkillSet
from homiebot.skills.skillset import PerceivedWorld, PlansInPerceivedWorld
from homiebot.types import Observation, Subtask, WorldState

#: A skill runner, or a factory ``(sim, scene_seed) -> runner`` (seeded execution noise per episode).
SkillsArgument = SkillRunner | Callable[[Simulator, int], SkillRunner] | None


class InProcessBackend:
    """:class:`homiebot.agent.loop.EpisodeBackend` over a :class:`~homiebot.sim.base.Simulator`.

    ``skills`` default: a noiseless :class:`homiebot.skills.SkillSet` seeded with the scene seed (model
    names are checked against the skills that serve them). ``grounder``: the executor's grounder (default:
    the alias grounder); :meth:`ground_with` replaces it after the reset (a perception world graph).
    """

    def __init__(self, sim: Simulator, config: ExecutorConfig | None = None, *, skills: SkillsArgument = None,
                 grounder: Grounder | None = None, agent_configs: Mapping[int, ExecutorConfig] | None = None) -> None:
        self.sim = sim
        self.config = config or ExecutorConfig()
        self.skills = skills
        self.grounder = grounder
        self._agent_grounders: dict[int, Grounder] = {}  # a partner's own grounder (its own world graph)
        self.agent_configs = dict(agent_configs or {})
        self._executor: Executor | None = None
        self._perceived: PerceivedWorld | None = None
        self._agent_executors: dict[int, Executor] = {}
        self._state: WorldState | None = None  # the state last read, while nothing has acted since
        self._views: Observation | None = None  # the views last rendered, while nothing has acted since

    def ground_with(self, grounder: Grounder, agent: int = 0) -> None:
        """Ground agent ``agent``'s subtasks with ``grounder`` from now on (a world graph built after the reset;
        in a two-agent episode each agent's own)."""
        if agent:
            self._agent_grounders[agent] = grounder
            self._agent_executors.pop(agent, None)
            return
        self.grounder = grounder
        self._executor = None
        self._agent_executors = {a: e for a, e in self._agent_executors.items() if a in self._agent_grounders}

    def plan_skills_in(self, world: PerceivedWorld | None) -> None:
        """Skills that plan from geometry (:class:`~homiebot.skills.skillset.PlansInPerceivedWorld`) take it from
        ``world`` from now on: perception's, set after the reset like :meth:`ground_with`."""
        self._perceived = world
        self._executor = None

    def reset(self, scene: str, seed: int) -> tuple[WorldState, SceneSpec]:
        self._perceived = None
        self._executor = None
        self._agent_executors = {}
        self._agent_grounders = {}
        self._views = self.sim.reset(scene, seed=seed)
        self._state = self.sim.state()
        self._scene_seed = seed
        return self._state, self.sim.scene_spec()

    def render(self, agent: int = 0) -> Sequence[NDArray[Any]]:
        return self.observe(agent).images()

    def observe(self, agent: int = 0) -> Observation:
        if agent:
            return self._view(agent).observe()
        if self._views is None:
            self._views = self.sim.observe()
        return self._views

    def state(self, agent: int = 0) -> WorldState:
        if agent:
            return self._view(agent).state()
        if self._state is None:
            self._state = self.sim.state()
        return self._state

    def look_at(self, target: tuple[float, float, float], raise_torso: bool = True) -> Observation | None:
        """The robot's head camera pointed at ``target`` (:class:`homiebot.agent.loop.LooksInto`); None when the
        simulator has no head to point. The clock moves, so the views rendered before are no longer the latest."""
        if not isinstance(self.sim, SupportsHeadLook):
            return None
        seen = self.sim.look_at(target, raise_torso)
        self._views = None
        return seen

    def begin_round(self) -> None:
        """A lock-step round starts when the slower agent's last action ended (PARTNR's agents act together)."""
        if isinstance(self.sim, SupportsAgents):
            self.sim.sync_clocks()
            self._views = None  # stamped with the old time

    def _view(self, agent: int) -> Simulator:
        if not isinstance(self.sim, SupportsAgents):
            raise ValueError(f"the {self.sim.name} simulator has one agent; agent {agent} does not exist")
        return self.sim.agent(agent)

    def execute(self, subtask: Subtask, model: str, inventory: tuple[str, ...], round_index: int,
                agent: int = 0) -> ExecutionOutcome:
        if agent:
            executor = self._agent_executors.get(agent) or self._make_agent_executor(agent)
            state = self._view(agent).state()
        else:
            executor = self._executor or self._make_executor()
            state = self.state()
        self._state, self._views = None, None  # the world changes now
        report = executor.execute_detailed(subtask, model, inventory, state)
        grounded = None
        if report.action is not None and report.target is not None:
            grounded = Subtask(subtask.action, report.target, report.place)
        return ExecutionOutcome(report.feedback, report.path_length, dict(report.timings), grounded=grounded,
                                released_at=report.released_at)

    def _make_executor(self) -> Executor:
        skills = self.skills
        if skills is None:
            skills = SkillSet(self.sim, noise=None, seed=self._scene_seed)
        elif not isinstance(skills, SkillRunner):
            skills = skills(self.sim, self._scene_seed)
        if isinstance(skills, PlansInPerceivedWorld):
            skills.plan_in(self._perceived)
        self._executor = Executor(self.sim, grounder=self.grounder, config=self.config, skills=skills)
        return self._executor

    def _make_agent_executor(self, agent: int) -> Executor:
        view = self._view(agent)
        skills = self.skills
        seed = self._scene_seed + 7919 * agent  # the agent's own noise stream
        if skills is None or isinstance(skills, SkillRunner):
            # A runner given as an object is bound to the robot's simulator: the partner gets the default layer.
            skills = SkillSet(view, noise=None, seed=seed)
        else:
            skills = skills(view, seed)
        config = self.agent_configs.get(agent, self.config)
        executor = Executor(view, grounder=self._agent_grounders.get(agent, self.grounder), config=config, skills=skills)
        self._agent_executors[agent] = executor
        return executor
