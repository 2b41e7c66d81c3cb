"""PARTNR's human partner in the sim bridge (``human:=true``): the human's own services and skill actions under
``/human``, one shared world. The bridge node is built in this process over a real simulator with the human and
its handlers are called directly with real homie_msgs goals (as tests/ros/test_ros_skills.py does for the robot);
the same calls on the in-process simulator give the same states."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros


class GoalHandle:
    def __init__(self, request) -> None:
        self.request = request

    def publish_feedback(self, feedback) -> None:
        pass

    def succeed(self) -> None:
        pass


@pytest.fixture
def bridge():
    import rclpy

    from homiebot.sim.base import make_simulator

    rclpy.init(args=["--ros-args", "-p", "publish_camera_topics:=false", "-p", "human:=true"])
    from sim_bridge.node import SimBridge

    sim = make_simulator("mujoco", render=True, width=64, height=64, human=True)
    node = SimBridge(simulator=sim)
    yield node
    node.destroy_node()
    rclpy.try_shutdown()


def _reset(bridge, scene="apartment_1", seed=0):
    from homie_msgs.srv import ResetEpisode

    response = bridge._on_reset(ResetEpisode.Request(scene=scene, seed=seed), ResetEpisode.Response())
    assert response.success, response.message


def _go(bridge, target, agent):
    from homie_msgs.action import Navigate

    goal = Navigate.Goal(target=target, model="NoMaD", reset_arm_first=True)
    return bridge._on_navigate(GoalHandle(goal), agent)


def _manipulate(bridge, operation, obj, agent, place=""):
    from homie_msgs.action import Manipulate

    goal = Manipulate.Goal(operation=getattr(Manipulate.Goal, operation), object=obj, place=place, model="RT-1-X",
                           reset_arm_first=True)
    return bridge._on_manipulate(GoalHandle(goal), agent)


def test_the_human_acts_in_its_own_namespace_on_the_one_world(bridge):
    from homie_msgs.srv import GetWorldState, RenderViews

    from homiebot.ros import convert
    from homiebot.sim.base import make_simulator

    assert bridge.agents == (0, 1)
    _reset(bridge)
    robot_before = bridge._on_get_state(GetWorldState.Request(), GetWorldState.Response()).state
    assert convert.skill_result_from_msg(_go(bridge, "tv_stand", 1).result).success
    picked = _manipulate(bridge, "PICK", "mug", 1)
    human_state = bridge._on_human_state(GetWorldState.Request(), GetWorldState.Response()).state
    robot_after = bridge._on_get_state(GetWorldState.Request(), GetWorldState.Response()).state
    # The human moved and holds the mug; the robot did not move; both see one world (the same version).
    assert human_state.held == "mug" and robot_after.held == ""
    assert (robot_after.robot_pose.position.x, robot_after.robot_pose.position.y) == (
        robot_before.robot_pose.position.x, robot_before.robot_pose.position.y)
    assert human_state.state_sequence == robot_after.state_sequence > robot_before.state_sequence
    assert picked.state.held == "mug"
    # The robot cannot pick what the human holds.
    _go(bridge, "tv_stand", 0)
    refused = _manipulate(bridge, "PICK", "mug", 0)
    core = convert.skill_result_from_msg(refused.result)
    assert not core.success and "human" in core.detail
    # The same calls in-process give the same human state.
    sim = make_simulator("mujoco", render=False, human=True)
    try:
        sim.reset("apartment_1", seed=0)
        view = sim.agent(1)
        view.go_to("tv_stand")
        view.pick("mug")
        expected = view.state()
    finally:
        sim.shutdown()
    assert human_state.robot_pose.position.x == pytest.approx(expected.robot.x, abs=1e-6)
    assert human_state.robot_pose.position.y == pytest.approx(expected.robot.y, abs=1e-6)
    # The human's views are its own four cameras.
    views = bridge._on_human_render(RenderViews.Request(include_depth=False, include_segmentation=True),
                                    RenderViews.Response()).views
    robot_views = bridge._on_render(RenderViews.Request(include_depth=False, include_segmentation=True),
                                    RenderViews.Response()).views
    assert [v.name for v in views.views] == ["front", "left", "back", "right"]
    assert views.robot_pose.position.x == pytest.approx(expected.robot.x, abs=1e-6)
    assert bytes(views.views[0].rgb.data) != bytes(robot_views.views[0].rgb.data)
