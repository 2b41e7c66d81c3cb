"""The episode loop's in-process backend: the simulator, the executor and the skill layer in this process.

:class:`InProcessBackend` is what :func:`homiebot.agent.loop.run_episode` runs the loop over; the ROS 2
planner node runs the same loop over its clients of the sim bridge and the executor node
(``ros2_ws/src/planner_node``). Both give the loop the same answers for the same task and seed.

It keeps what it already knows, as the graph backend does: the state it last read goes to the executor's
checks (nothing acted on the world since), and the views the reset rendered are the first round's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from homiebot.agent.loop import ExecutionOutcome
from homiebot.executor.executor import Executor, ExecutorConfig, SkillRunner
from homiebot.perception.grounding import Grounder
from homiebot.sim.base import Simulator
from homiebot.sim.scene import SceneSpec
from homiebot.skills import SkillSet
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
                 grounder: Grounder | None = None) -> None:
        self.sim = sim
        self.config = config or ExecutorConfig()
        self.skills = skills
        self.grounder = grounder
        self._executor: Executor | None = None
        self._state: WorldState | None = None  # the state last read, while nothing has acted since
        self._views: Observation | None = None  # the views last rendered, while nothing has acted since

    def ground_with(self, grounder: Grounder) -> None:
        self.grounder = grounder
        self._executor = None

    def reset(self, scene: str, seed: int) -> tuple[WorldState, SceneSpec]:
        self._executor = None
        self._views = self.sim.reset(scene, seed=seed)
        self._state = self.sim.state()
        self._scene_seed = seed
        return self._state, self.sim.scene_spec()

    def render(self) -> Sequence[np.ndarray]:
        return self.observe().images()

    def observe(self) -> Observation:
        if self._views is None:
            self._views = self.sim.observe()
        return self._views

    def state(self) -> WorldState:
        if self._state is None:
            self._state = self.sim.state()
        return self._state

    def execute(self, subtask: Subtask, model: str, inventory: tuple[str, ...], round_index: int) -> ExecutionOutcome:
        executor = self._executor or self._make_executor()
        state = self.state()
        self._state, self._views = None, None  # the world changes now
        report = executor.execute_detailed(subtask, model, inventory, state)
        grounded = None
        if report.action is not None and report.target is not None:
            grounded = Subtask(subtask.action, report.target, report.place)
        return ExecutionOutcome(report.feedback, report.path_length, dict(report.timings), grounded=grounded)

    def _make_executor(self) -> Executor:
        skills = self.skills
        if skills is None:
            skills = SkillSet(self.sim, noise=None, seed=self._scene_seed)
        elif not isinstance(skills, SkillRunner):
            skills = skills(self.sim, self._scene_seed)
        self._executor = Executor(self.sim, grounder=self.grounder, config=self.config, skills=skills)
        return self._executor
