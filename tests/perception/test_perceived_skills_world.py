"""With perception on, skills that plan from geometry get perception's world (PlansInPerceivedWorld); the
oracle skills, which place by name, are left as they are."""

from __future__ import annotations

from homiebot.agent.loop import run_episode
from homiebot.executor.executor import SkillRunnerBase
from homiebot.perception.world_model import PerceptionConfig, WorldModel
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.skills import PlansInPerceivedWorld, SkillSet
from homiebot.tasks.suite import get_task
from homiebot.types import Action, SkillResult, SkillStatus

ANSWERS = ["Analysis: a\nSubtask: [Go to, tv_stand]\nModel: NoMaD", "Analysis: a\nSubtask: [End]\nModel: None"]


class _GeometryPlanner(SkillRunnerBase):
    """Runs nothing; keeps the world it was told to plan in and what it saw there at each attempt."""

    def __init__(self, sim) -> None:
        self.sim = sim
        self.world = None
        self.seen: list[set[str]] = []

    def plan_in(self, world) -> None:
        self.world = world

    def run(self, action: Action, model: str, target: str, place: str | None = None) -> SkillResult:
        state = self.sim.state()
        self.seen.append(set((self.world(state) if self.world else state).entities))
        return SkillResult(SkillStatus.SUCCESS, "ok")


def test_the_episode_gives_geometry_planning_skills_perceptions_world(sim):
    assert isinstance(_GeometryPlanner(None), PlansInPerceivedWorld)
    assert not isinstance(SkillSet.__new__(SkillSet), PlansInPerceivedWorld)
    task = get_task("emmoe-040")  # apple_1 lies in the closed fridge, where no view reaches
    made: list[_GeometryPlanner] = []

    def skills(s, seed):
        made.append(_GeometryPlanner(s))
        return made[-1]

    def perception(spec, state):
        return WorldModel(spec, state, PerceptionConfig(builder="conceptgraph", semantic_grounding=False))

    run_episode(sim, ScriptedPlanner(ANSWERS), task=task, skills=skills, perception=perception)
    assert made and made[0].world is not None
    assert made[0].seen and "apple_1" not in made[0].seen[0]  # the skill's world is perception's
    assert "apple_1" in sim.state().entities

    made.clear()
    run_episode(sim, ScriptedPlanner(ANSWERS), task=task, skills=skills)
    assert made[0].world is None and "apple_1" in made[0].seen[0]  # no perception: the simulator's state


class _Looker(_GeometryPlanner):
    """Reads the world, moves the robot with the oracle Go to (time passes), reads it twice more."""

    def __init__(self, sim) -> None:
        super().__init__(sim)
        self.looks: list[int] = []

    def run(self, action: Action, model: str, target: str, place: str | None = None) -> SkillResult:
        if action is not Action.GO_TO:
            return SkillResult(SkillStatus.SUCCESS, "ok")
        counted = self.sim.observe.calls
        self.world(self.sim.state())  # the round's views are fused already: no new look
        self.looks.append(self.sim.observe.calls - counted)
        SkillSet(self.sim).run(action, model, target, place)
        self.world(self.sim.state())  # the robot moved: a fresh look first
        self.looks.append(self.sim.observe.calls - counted)
        seen = self.world(self.sim.state())  # nothing changed since: none
        self.looks.append(self.sim.observe.calls - counted)
        self.seen.append(set(seen.entities))
        return SkillResult(SkillStatus.SUCCESS, "ok")


def test_skills_planning_in_the_image_built_graph_look_again_after_the_robot_moved(sim, monkeypatch):
    task = get_task("emmoe-040")
    observe = sim.observe

    def counting():
        counting.calls += 1
        return observe()

    counting.calls = 0
    monkeypatch.setattr(sim, "observe", counting)
    made: list[_Looker] = []

    def skills(s, seed):
        made.append(_Looker(s))
        return made[-1]

    def perception(spec, state):
        return WorldModel(spec, state, PerceptionConfig(builder="conceptgraph", semantic_grounding=False))

    run_episode(sim, ScriptedPlanner(ANSWERS), task=task, skills=skills, perception=perception)
    assert made[0].looks == [0, 1, 1]
    assert "apple_2" in made[0].seen[0]  # on the tv stand, seen from it

    made.clear()
    privileged = lambda spec, state: WorldModel(spec, state, PerceptionConfig(semantic_grounding=False))  # noqa: E731
    run_episode(sim, ScriptedPlanner(ANSWERS), task=task, skills=skills, perception=privileged)
    assert made[0].looks == [0, 0, 0]  # the privileged graph does not look again
