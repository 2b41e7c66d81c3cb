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
