"""PARTNR's text world description reaches model planners only when perception is configured to give it."""

from __future__ import annotations

import pytest

from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.planner.base import PlanRequest
from homiebot.planner.messages import build_messages
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import get_task

END = "Analysis: done\nSubtask: [End]\nModel: None"


def test_messages_put_the_world_description_before_the_instruction():
    request = PlanRequest(system_prompt="S", instruction="Task: t\n", images=[], world_description="kitchen: fridge")
    last = build_messages(request, include_images=False)[-1]
    assert last.role == "user" and last.text == "World description:\nkitchen: fridge\nTask: t\n"
    plain = PlanRequest(system_prompt="S", instruction="Task: t\n", images=[])
    assert build_messages(plain, include_images=False)[-1].text == "Task: t\n"


class _Spy(ScriptedPlanner):
    def __init__(self):
        super().__init__([END])
        self.requests: list[PlanRequest] = []

    def plan(self, request):
        self.requests.append(request)
        return super().plan(request)


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco")
    yield simulator
    simulator.shutdown()


@pytest.mark.parametrize("describe", [True, False])
def test_loop_fills_the_description_only_when_configured(sim, describe):
    from homiebot.perception.world_model import PerceptionConfig, WorldModel

    config = PerceptionConfig(builder="privileged", describe_world=describe, semantic_grounding=False)
    spy = _Spy()
    run_episode(sim, spy, task=get_task("emmoe-084"), config=EpisodeConfig(),
                perception=lambda spec, state: WorldModel(spec, state, config))
    description = spy.requests[0].world_description
    if describe:
        assert description and "kitchen_drawer" in description
    else:
        assert description is None
    assert "kitchen_drawer" in spy.requests[0].grounded_targets
