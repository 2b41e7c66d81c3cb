"""Core types <-> homie_msgs: exact round trips (through CDR, as on the wire) and clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytestmark = pytest.mark.ros


def _wire(msg):
    """Serialize and deserialize as DDS would."""
    from rclpy.serialization import deserialize_message, serialize_message

    return deserialize_message(serialize_message(msg), type(msg))


@pytest.mark.parametrize(
    "subtask",
    [("Go to", "fridge", None), ("Put", "apple", "fridge"), ("End", None, None), ("Go to", "", None), ("jump", "x", "")],
)
def test_subtask_round_trip_keeps_absent_and_empty_apart(subtask):
    from homiebot.ros import convert
    from homiebot.types import Subtask

    original = Subtask(*subtask)
    assert convert.subtask_from_msg(_wire(convert.subtask_to_msg(original))) == original


def test_feedback_codes_and_messages_round_trip():
    from homie_msgs.msg import Feedback as FeedbackMsg

    from homiebot.ros import convert
    from homiebot.types import ErrorCode, Feedback

    assert sorted(convert.ERROR_CODE_VALUES.values()) == list(range(len(ErrorCode)))
    for code in ErrorCode:
        feedback = Feedback(code, f"Unable to do it ({code.value}), the fridge is closed, you should open it first", ("apple",), 3)
        assert convert.feedback_from_msg(_wire(convert.feedback_to_msg(feedback))) == feedback
    assert FeedbackMsg.L3 == convert.ERROR_CODE_VALUES[ErrorCode.L3]
    with pytest.raises(convert.ConversionError, match="unknown feedback code 99"):
        convert.feedback_from_msg(FeedbackMsg(code=99))


def test_skill_result_carries_the_release_point_or_says_it_is_unknown():
    """A Put's release point (SkillResult.released_at) crosses the skill action and the subtask's result; a skill that
    does not know it (the oracle's) sends has_released_at false, and the origin is a point, not "unknown"."""
    from homie_msgs.action import ExecuteSubtask

    from homiebot.ros import convert
    from homiebot.types import SkillResult, SkillStatus

    put = SkillResult(SkillStatus.SUCCESS, "released sponge_1 in sink", 0.25, released_at=(5.125, -0.5, 0.9375))
    assert convert.skill_result_from_msg(_wire(convert.skill_result_to_msg(put))) == put
    for unknown in (SkillResult(SkillStatus.SUCCESS, "put", 0.0), SkillResult(SkillStatus.DROPPED, "fell", 1.0)):
        msg = _wire(convert.skill_result_to_msg(unknown))
        assert not msg.has_released_at and convert.skill_result_from_msg(msg).released_at is None
    origin = SkillResult(SkillStatus.SUCCESS, "at the origin", released_at=(0.0, 0.0, 0.0))
    assert convert.skill_result_from_msg(_wire(convert.skill_result_to_msg(origin))).released_at == (0.0, 0.0, 0.0)
    result = ExecuteSubtask.Result()
    result.has_released_at, result.released_at = convert.released_at_to_msg(put.released_at)
    back = _wire(result)
    assert convert.released_at_from_msg(back.has_released_at, back.released_at) == put.released_at


def test_apply_action_request_names_the_grounded_subtask_its_round_state_and_release_point():
    from homiebot.ros import convert
    from homiebot.ros.perception_actions import apply_action_request
    from homiebot.types import Pose2D, Subtask, WorldState

    state = convert.world_state_to_msg(WorldState(Pose2D(1.0, 2.0, 0.5), 0.3, None, {}, "apartment_3", "kitchen"), 12.5)
    request = _wire(apply_action_request(Subtask("Put", "sponge", "sink"), 7, state, (3.25, 1.5, 0.875)))
    assert convert.subtask_from_msg(request.subtask) == Subtask("Put", "sponge", "sink")
    assert request.round_index == 7 and request.state.scene == "apartment_3"
    assert convert.time_seconds(request.state.header.stamp) == 12.5
    assert convert.released_at_from_msg(request.has_released_at, request.released_at) == (3.25, 1.5, 0.875)
    pick = _wire(apply_action_request(Subtask("Pick", "sponge"), 6, state, None))
    assert not pick.has_released_at and convert.subtask_from_msg(pick.subtask) == Subtask("Pick", "sponge")


def test_planner_output_round_trip():
    from homiebot.ros import convert
    from homiebot.types import PlannerOutput, Subtask

    for output in (
        PlannerOutput("Analysis: a\nSubtask: [Pick, cup]\nModel: RT-1-X", "a", Subtask("Pick", "cup"), "RT-1-X"),
        PlannerOutput("gibberish", parse_error="no Subtask line"),
    ):
        msg = _wire(convert.planner_output_to_msg(output, 4, "Task: t", 1.5))
        assert convert.planner_output_from_msg(msg) == output
        assert msg.round_index == 4 and msg.instruction == "Task: t"


def test_world_state_round_trip_is_exact():
    from homiebot.ros import convert
    from homiebot.types import EntityKind, EntityState, Pose2D, WorldState

    entities = {
        "kitchen": EntityState("kitchen", "kitchen", EntityKind.ROOM, ("cooking area",), (1.0, 2.0, 0.0), (0.0, 0.0, 0.0), (4.0, 4.0, 2.5), room="kitchen"),
        "fridge": EntityState("fridge", "refrigerator", EntityKind.FURNITURE, ("fridge",), (1.1, 0.3, 0.9), (0.8, 0.0, 0.0), (1.4, 0.6, 1.8),
                              room="kitchen", articulated=True, interactive=True, is_open=False, appliance=True, powered_on=True, level=1,
                              functions=("cool",)),
        "apple": EntityState("apple", "apple", EntityKind.OBJECT, (), (1.1, 0.3, 1.0), (1.05, 0.25, 0.95), (1.15, 0.35, 1.05),
                             room="kitchen", parent="fridge", relation="in", color="red", is_clean=True, is_hot=False,
                             half_extents=(0.04, 0.04, 0.045)),  # round: its own box without a heading
        # PARTNR's containers: filled, empty (an object that holds no liquid, the apple, has None).
        "mug": EntityState("mug", "mug", EntityKind.OBJECT, (), (1.0, 0.2, 1.0), (0.95, 0.15, 0.95), (1.05, 0.25, 1.05),
                           room="kitchen", is_filled=True, half_extents=(0.05, 0.035, 0.05), yaw=-2.9876543),
        "bowl": EntityState("bowl", "bowl", EntityKind.OBJECT, (), (1.2, 0.2, 1.0), (1.1, 0.1, 0.97), (1.3, 0.3, 1.03),
                            room="kitchen", is_filled=False, half_extents=(0.1, 0.1, 0.03), yaw=0.0,
                            wall_thickness=0.006),
    }
    state = WorldState(Pose2D(0.123456789, -2.5, 1.234), 0.3, "apple", entities, "apartment_1", "kitchen")
    back = convert.world_state_from_msg(_wire(convert.world_state_to_msg(state)))
    assert back.entities == state.entities
    # The objects' own boxes travel (a grasp planner through the graph plans with them): a heading of 0 is a heading.
    assert (back.entities["bowl"].yaw, back.entities["apple"].yaw, back.entities["fridge"].half_extents) == (0.0, None, None)
    assert (back.held, back.scene, back.robot_room, back.robot_radius) == (state.held, state.scene, state.robot_room, state.robot_radius)
    assert (back.robot.x, back.robot.y) == (state.robot.x, state.robot.y)
    assert back.robot.yaw == pytest.approx(state.robot.yaw, abs=1e-12)
    assert back.reach_distance("fridge") == state.reach_distance("fridge")


def test_observation_images_round_trip_bit_exact():
    from homiebot.ros import convert
    from homiebot.types import CameraView, Observation, Pose2D

    rng = np.random.default_rng(1)
    yaw = 0.7
    pose = np.eye(4)
    pose[:3, :3] = [[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]]
    pose[:3, 3] = [1.0, 2.0, 1.1]
    views = {
        name: CameraView(name, rng.integers(0, 256, (48, 64, 3), dtype=np.uint8), rng.random((48, 64), dtype=np.float32) * 5,
                         rng.integers(0, 9, (48, 64), dtype=np.int32), 40.0, 41.0, 31.5, 23.5, pose)
        for name in ("front", "left", "back", "right")
    }
    observation = Observation(views, {3: "apple", 5: "fridge"}, Pose2D(1.0, 2.0, yaw), "apple", 12.25)
    msg = _wire(convert.observation_to_msg(observation))
    back = convert.observation_from_msg(msg)
    assert list(back.views) == ["front", "left", "back", "right"]
    for name, view in views.items():
        got = back.views[name]
        assert np.array_equal(got.rgb, view.rgb) and np.array_equal(got.depth, view.depth)
        assert np.array_equal(got.segmentation, view.segmentation)
        assert (got.fx, got.fy, got.cx, got.cy) == (view.fx, view.fy, view.cx, view.cy)
        assert np.allclose(got.camera_to_world, view.camera_to_world, atol=1e-12)
    assert back.instance_names == observation.instance_names and back.held_object == "apple" and back.sim_time == 12.25
    assert [img.shape for img in convert.multiview_images(msg)] == [(48, 64, 3)] * 4
    light = convert.observation_to_msg(observation, depth=False, segmentation=False)
    assert light.views[0].depth.width == 0 and convert.camera_view_from_msg(light.views[0]).depth.shape == (48, 64)


def test_image_errors_are_precise():
    from sensor_msgs.msg import Image

    from homiebot.ros import convert

    with pytest.raises(convert.ConversionError, match="unsupported encoding 'yuv422'"):
        convert.image_from_msg(Image(encoding="yuv422", width=2, height=2, step=4, data=bytes(8)))
    with pytest.raises(convert.ConversionError, match="holds 3 bytes, 12 expected"):
        convert.image_from_msg(Image(encoding="rgb8", width=2, height=2, step=6, data=bytes(3)))
    with pytest.raises(convert.ConversionError, match=r"rgb8 needs shape \(H, W, 3\)"):
        convert.image_to_msg(np.zeros((4, 4), np.uint8), "rgb8", "f")
    padded = Image(encoding="mono8", width=3, height=2, step=4, data=bytes([1, 2, 3, 0, 4, 5, 6, 0]))
    assert convert.image_from_msg(padded).tolist() == [[1, 2, 3], [4, 5, 6]]


def test_world_graph_round_trip_and_markers():
    from homiebot.perception.world_graph import GraphNode, NodeKind, Relation, WorldGraph
    from homiebot.ros import convert

    graph = WorldGraph("apartment_1")
    graph.add_node(GraphNode("kitchen", NodeKind.ROOM, "kitchen", "kitchen", bbox_max=(4.0, 4.0, 2.5)))
    graph.add_node(GraphNode("fridge", NodeKind.FURNITURE, "refrigerator", "fridge", ("refrigerator",), (1.0, 0.5, 0.9),
                             (0.7, 0.2, 0.0), (1.3, 0.8, 1.8), {"is_open": False}, ("openable", "container")))
    graph.add_node(GraphNode("apple", NodeKind.OBJECT, "apple", "apple", (), (1.0, 0.5, 1.0), (0.95, 0.45, 0.95),
                             (1.05, 0.55, 1.05), {"held": False, "temperature": 3.5, "color": "red"}, detections=2, confidence=0.73))
    graph.set_room("fridge", "kitchen")
    graph.set_placement("apple", "fridge", Relation.IN)
    export = graph.to_export()
    back = convert.world_graph_from_msg(_wire(convert.world_graph_to_msg(export, 3.0)))
    assert back == export
    markers = convert.world_graph_markers(export)
    texts = {m.text for m in markers.markers if m.text}
    assert {"fridge (closed)", "apple", "kitchen"} <= texts
    assert markers.markers[0].action == markers.markers[0].DELETEALL
    lines = [m for m in markers.markers if m.ns == "graph/relations"]
    assert len(lines) == 1 and len(lines[0].points) == 2  # apple -> fridge
