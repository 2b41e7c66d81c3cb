"""--skills physical with perception: the physical skills plan from perception's world graph.

emmoe-084 (apartment_1): the short can on the kitchen counter, seen from the kitchen. Whether a grasp planned on the
perceived can holds is measured, not pinned: its centre is 1.7 cm off, and the gripper's 10 cm leaves 7.5 mm on
each side of the 8.5 cm can (docs/perception.md, "What the skills read")."""

from __future__ import annotations

import math

from homiebot.executor.executor import Executor
from homiebot.perception.world_model import PerceptionConfig, WorldModel
from homiebot.skills import PlansInPerceivedWorld
from homiebot.skills.physical import PhysicalSkillSet
from homiebot.tasks.suite import get_task
from homiebot.types import Action, Subtask


def test_physical_skills_plan_in_the_perceived_world_and_pick_from_it(sim):
    task = get_task("emmoe-084")
    sim.reset(task.scene, seed=task.seed)
    model = WorldModel(sim.scene_spec(), sim.state(), PerceptionConfig(builder="conceptgraph", semantic_grounding=False))
    Executor(sim).execute_detailed(Subtask("Go to", "kitchen_counter"), "NoMaD", (), sim.state())
    model.observe(sim.observe(), sim.state())
    skills = PhysicalSkillSet(sim)
    assert isinstance(skills, PlansInPerceivedWorld)
    assert skills.world() == sim.state()  # no perception handed over: the simulator's state
    skills.plan_in(model.perceived_state)
    planned, truth = skills.world(), sim.state()
    can_seen, can_true = planned.entities["short_can"], truth.entities["short_can"]
    assert can_seen.position != can_true.position and math.dist(can_seen.position, can_true.position) < 0.06
    # A round object is completed with its model's size (the views see its near side and top only).
    assert can_seen.half_extents == (0.0425, 0.0425, 0.0175) and can_seen.yaw is None
    assert not any(n not in model.perceived_names(truth) and e.kind.value == "object" for n, e in planned.entities.items())

    result = skills.run(Action.GO_TO, "NoMaD", "short_can")
    assert result.success, result.detail
    result = skills.run(Action.PICK, "RT-1-X", "short_can")  # planned on the perceived can: it runs, held or not
    assert result.success == (sim.state().held == "short_can")
