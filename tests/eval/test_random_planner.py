"""The random baseline: what it sees, what it may choose, and that it is reproducible."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from homiebot.planner.base import PlanRequest
from homiebot.planner.prompt import parse_output
from homiebot.planner.random_planner import RandomPlanner, candidate_subtasks, visible_instances
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, CameraView, Observation, Pose2D


def _view(name: str, seg: np.ndarray) -> CameraView:
    h, w = seg.shape
    return CameraView(
        name=name,
        rgb=np.zeros((h, w, 3), np.uint8),
        depth=np.ones((h, w), np.float32),
        segmentation=seg.astype(np.int32),
        fx=1.0,
        fy=1.0,
        cx=w / 2,
        cy=h / 2,
        camera_to_world=np.eye(4),
    )


def observation() -> Observation:
    front = np.zeros((32, 32), np.int32)
    front[:10, :10] = 1  # fridge, 100 px
    front[20:22, 20:22] = 2  # apple, 4 px in front ...
    left = np.zeros((32, 32), np.int32)
    left[:5, :5] = 2  # ... 25 px on the left
    back = np.zeros((32, 32), np.int32)
    back[0, 0] = 3  # kitchen floor, 1 px
    right = np.full((32, 32), 9, np.int32)  # an id with no name: ignored
    views = {n: _view(n, s) for n, s in zip(("front", "left", "back", "right"), (front, left, back, right))}
    return Observation(views=views, instance_names={1: "fridge", 2: "apple_1", 3: "kitchen"}, robot_pose=Pose2D(0, 0, 0))


def test_visible_instances_counts_pixels_per_view() -> None:
    obs = observation()
    assert visible_instances(obs, min_pixels=1) == ["apple_1", "fridge", "kitchen"]
    # The apple has 25 px in one view (views are not summed); the floor has 1 px.
    assert visible_instances(obs, min_pixels=20) == ["apple_1", "fridge"]
    assert visible_instances(obs, min_pixels=26) == ["fridge"]


KINDS = {"fridge": "furniture", "apple_1": "object", "kitchen": "room", "table": "furniture"}


def test_candidates_follow_the_one_hand_rule_and_kinds() -> None:
    empty = {s.text() for s in candidate_subtasks(["fridge", "apple_1", "kitchen"], (), KINDS, EMMOE_ACTIONS)}
    assert empty == {
        "[Go to, apple_1]", "[Go to, fridge]", "[Go to, kitchen]",
        "[Pick, apple_1]", "[Open, fridge]", "[Close, fridge]", "[End]",
    }
    holding = {s.text() for s in candidate_subtasks(["fridge", "table", "kitchen"], ("apple_1",), KINDS, EMMOE_ACTIONS)}
    assert holding == {
        "[Go to, fridge]", "[Go to, kitchen]", "[Go to, table]",
        "[Put, apple_1, fridge]", "[Put, apple_1, table]", "[End]",
    }
    # Nothing visible: End is the only valid subtask; a restricted action list is honoured.
    assert [s.text() for s in candidate_subtasks([], (), KINDS, EMMOE_ACTIONS)] == ["[End]"]
    only_go = {s.text() for s in candidate_subtasks(["fridge"], (), KINDS, ("Go to", "End"))}
    assert only_go == {"[Go to, fridge]", "[End]"}
    # Without kinds, a visible name is a candidate for every role.
    unknown = {s.text() for s in candidate_subtasks(["thing"], (), {}, EMMOE_ACTIONS)}
    assert unknown == {"[Go to, thing]", "[Pick, thing]", "[Open, thing]", "[Close, thing]", "[End]"}


def _scene() -> SimpleNamespace:
    """The three lists of a SceneSpec the planner reads kinds from."""
    return SimpleNamespace(
        rooms=[SimpleNamespace(name="kitchen")],
        furniture=[SimpleNamespace(name="fridge")],
        objects=[SimpleNamespace(name="apple_1")],
    )


def _request(obs: Observation, inventory=()) -> PlanRequest:
    return PlanRequest(
        system_prompt="",
        instruction="",
        images=obs.images(),
        inventory=tuple(inventory),
        actions=EMMOE_ACTIONS,
        models=EMMOE_MODELS,
        observation=obs,
        scene=_scene(),
    )


def test_answers_parse_and_stay_among_candidates() -> None:
    planner = RandomPlanner()
    planner.reset("put the apple in the fridge", seed=3)
    obs = observation()
    allowed = {"[Go to, apple_1]", "[Go to, fridge]", "[Pick, apple_1]", "[Open, fridge]", "[Close, fridge]", "[End]"}
    seen = set()
    for _ in range(200):
        out = parse_output(planner.plan(_request(obs)))
        assert out.subtask is not None and out.parse_error is None
        seen.add(out.subtask.text())
        if out.subtask.is_end:
            assert out.model == ""
        elif out.subtask.action in ("Pick", "Put"):
            assert out.model == "RT-1-X"
        elif out.subtask.action in ("Open", "Close"):
            assert out.model == "octo"
    assert seen == allowed  # uniform over 6 candidates: 200 draws see them all


def test_reset_makes_episodes_reproducible_whatever_came_before() -> None:
    obs = observation()
    a = RandomPlanner()
    a.reset("task", seed=7)
    first = [a.plan(_request(obs)) for _ in range(10)]
    b = RandomPlanner()
    b.reset("other task", seed=1)
    for _ in range(5):
        b.plan(_request(obs))
    b.reset("task", seed=7)
    assert [b.plan(_request(obs)) for _ in range(10)] == first
    c = RandomPlanner()
    c.reset("task", seed=8)
    assert [c.plan(_request(obs)) for _ in range(10)] != first


def test_without_views_it_says_what_it_needs() -> None:
    planner = RandomPlanner()
    request = _request(observation())
    request.observation = None
    with pytest.raises(ValueError, match="segmentation"):
        planner.plan(request)
    with pytest.raises(ValueError):
        RandomPlanner(min_pixels=0)
