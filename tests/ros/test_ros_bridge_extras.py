"""What a simulator tells the sim bridge beyond the Simulator protocol is declared (homiebot.sim.base:
SupportsClock, SupportsPath, SupportsJointStates, SupportsRobotModel), not probed by name: the embedded MuJoCo
simulator declares all four (its human's point of view the clock and the path), and the bridge reads them from
the declarations: ``/clock`` and the state stamps from ``sim_time``, ``/sim/path`` from ``travelled_path``,
``/joint_states`` from ``joint_positions``, ``/robot_description`` and the arm links' ``/tf`` from
``robot_kinematics``. A backend that declares none (here the MuJoCo simulator behind a wrapper with only the
protocol's methods) gets the bridge's fallbacks: the views' time, an empty path, the base joints only, no robot
model; it is served all the same."""

from __future__ import annotations

import pytest


def test_the_embedded_simulator_declares_its_extras():
    from homiebot.sim.base import (
        Simulator,
        SupportsAgents,
        SupportsClock,
        SupportsJointStates,
        SupportsPath,
        SupportsRobotModel,
    )
    from homiebot.sim.mujoco.backend import MujocoSimulator

    sim = MujocoSimulator(render=False, human=True)
    try:
        for capability in (Simulator, SupportsClock, SupportsPath, SupportsJointStates, SupportsRobotModel, SupportsAgents):
            assert isinstance(sim, capability), capability.__name__
        human = sim.agent(1)
        assert isinstance(human, SupportsClock) and isinstance(human, SupportsPath)
        # The robot's joints and model are the robot's: the human's point of view does not claim them.
        assert not isinstance(human, SupportsJointStates) and not isinstance(human, SupportsRobotModel)
        assert not isinstance(_OnlyTheProtocol(sim), (SupportsClock, SupportsPath, SupportsJointStates, SupportsRobotModel))
        assert isinstance(_OnlyTheProtocol(sim), Simulator)
    finally:
        sim.shutdown()


class _OnlyTheProtocol:
    """A backend with the Simulator protocol's methods only (the MuJoCo simulator's, delegated): no extras."""

    name = "bare"

    def __init__(self, inner) -> None:
        self._inner = inner

    def reset(self, scene, seed=0):
        return self._inner.reset(scene, seed=seed)

    def observe(self):
        return self._inner.observe()

    def state(self):
        return self._inner.state()

    def scene_spec(self):
        return self._inner.scene_spec()

    def go_to(self, target):
        return self._inner.go_to(target)

    def pick(self, obj):
        return self._inner.pick(obj)

    def put(self, obj, place):
        return self._inner.put(obj, place)

    def open(self, target):
        return self._inner.open(target)

    def close(self, target):
        return self._inner.close(target)

    def reset_arm(self):
        self._inner.reset_arm()

    def render_topdown(self, size=512):
        return self._inner.render_topdown(size)

    def shutdown(self):
        self._inner.shutdown()


class _Handle:
    def __init__(self, request) -> None:
        self.request = request

    def publish_feedback(self, feedback) -> None:
        pass

    def succeed(self) -> None:
        pass


@pytest.mark.ros
def test_the_bridge_reads_the_declared_extras_or_falls_back(ros_domain):
    import rclpy
    from homie_msgs.action import Navigate
    from homie_msgs.srv import RenderViews, ResetEpisode

    from homiebot.ros import convert
    from homiebot.sim.mujoco import robot
    from homiebot.sim.mujoco.backend import MujocoSimulator

    rclpy.init(args=["--ros-args", "-p", "publish_camera_topics:=false", "-p", "prerender:=false"])
    from sim_bridge.node import SimBridge

    full_sim = MujocoSimulator(render=True, width=48, height=32)
    bare_sim = MujocoSimulator(render=True, width=48, height=32)
    full, bare = SimBridge(simulator=full_sim), SimBridge(simulator=_OnlyTheProtocol(bare_sim))
    try:
        assert full._clock_source is full_sim and full._path_source is full_sim and full._joint_source is full_sim
        assert full._kinematics is not None and full._kinematics.urdf().startswith("<?xml")
        assert (bare._clock_source, bare._path_source, bare._joint_source, bare._kinematics) == (None, None, None, None)
        for bridge in (full, bare):
            assert bridge._on_reset(ResetEpisode.Request(scene="apartment_1", seed=0), ResetEpisode.Response()).success
            bridge._on_render(RenderViews.Request(), RenderViews.Response())
            result = bridge._on_navigate(_Handle(Navigate.Goal(target="kitchen_counter", model="NoMaD")))
            assert convert.skill_result_from_msg(result.result).success
        # The declared clock: the simulator's time after the walk, on the state the skill answered with.
        assert full._sim_time() == full_sim.sim_time > 0.0
        assert convert.time_seconds(result.state.header.stamp) == pytest.approx(bare._cached[1].sim_time)
        # Without it: the time of the last views (rendered before the walk, so earlier than the simulator's).
        assert bare._sim_time() == bare._cached[1].sim_time < bare_sim.sim_time
        # The declared path, point for point; none without it.
        path = full._path(1.0)
        published = [coordinate for p in path.poses for coordinate in (p.pose.position.x, p.pose.position.y)]
        assert published == pytest.approx([coordinate for point in full_sim.travelled_path for coordinate in point])
        assert len(path.poses) >= 2 and bare._path(1.0).poses == []
        # The declared joints: the arm and the fingers beside the base; the base alone without them.
        observation = full_sim.observe()
        joints = full._joint_state(observation.robot_pose, full._reported_joints(), 1.0)
        assert set(joints.name) == set(robot.BASE_JOINTS) | set(full_sim.joint_positions())
        assert bare._reported_joints() is None
        assert set(bare._joint_state(observation.robot_pose, bare._reported_joints(), 1.0).name) == set(robot.BASE_JOINTS)
    finally:
        full.destroy_node()
        bare.destroy_node()
        rclpy.try_shutdown()
