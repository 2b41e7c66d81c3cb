"""The skill layer in the graph: the sim bridge runs every skill goal through a SkillSet with the configured
execution noise, seeded at each reset as the in-process loop seeds it, and the executor node's skill runner
hands the robot side the same model the in-process skill layer would run.

The bridge node is built in this process (a real rclpy node over a simulator without rendering) and its
handlers are called directly with real homie_msgs goals; nothing is spun.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros

SCENE_TASK = "demo-drawer"


class GoalHandle:
    """What the bridge's action callbacks use of rclpy's ServerGoalHandle."""

    def __init__(self, request) -> None:
        self.request = request

    def publish_feedback(self, feedback) -> None:
        pass

    def succeed(self) -> None:
        pass


@pytest.fixture
def make_bridge():
    """``make_bridge("noise:=emmoe", ...)``: a SimBridge with these parameters (its node in the default context)."""
    import rclpy

    made = []

    def make(*parameters: str):
        from sim_bridge.node import SimBridge

        from homiebot.sim.base import make_simulator

        rclpy.init(args=["--ros-args", "-p", "publish_camera_topics:=false", *(x for p in parameters for x in ("-p", p))])
        sim = make_simulator("mujoco", render=False)
        try:
            bridge = SimBridge(simulator=sim)
        except BaseException:
            sim.shutdown()
            rclpy.try_shutdown()
            raise
        made.append(bridge)
        return bridge

    yield make
    for bridge in made:
        bridge.destroy_node()
    rclpy.try_shutdown()


def _reset(bridge, scene: str, seed: int) -> None:
    from homie_msgs.srv import ResetEpisode

    response = bridge._on_reset(ResetEpisode.Request(scene=scene, seed=seed), ResetEpisode.Response())
    assert response.success, response.message


def _attempt(bridge, action, model: str, target: str, place: str = ""):
    """One skill goal as the navigation / manipulation executor forwards it; the result as a core SkillResult."""
    from homie_msgs.action import Manipulate, Navigate

    from homiebot.ros import convert
    from homiebot.types import Action

    if action is Action.GO_TO:
        result = bridge._on_navigate(GoalHandle(Navigate.Goal(target=target, model=model, reset_arm_first=True)))
    else:
        operation = {Action.PICK: Manipulate.Goal.PICK, Action.PUT: Manipulate.Goal.PUT,
                     Action.OPEN: Manipulate.Goal.OPEN, Action.CLOSE: Manipulate.Goal.CLOSE}[action]
        goal = Manipulate.Goal(operation=operation, object=target, place=place, model=model, reset_arm_first=True)
        result = bridge._on_manipulate(GoalHandle(goal))
    return convert.skill_result_from_msg(result.result), result.state


def test_bridge_runs_skills_with_the_noise_of_the_in_process_skill_layer(make_bridge):
    """Same scene seed and preset: every attempt succeeds or fails as the in-process SkillSet's does, with the
    same reason; a reset restarts the noise stream."""
    from homiebot.sim.base import make_simulator
    from homiebot.skills import SkillSet
    from homiebot.tasks.suite import get_task
    from homiebot.types import Action, SkillStatus

    task = get_task(SCENE_TASK)
    seed = task.seed + 4
    drawer, can = "kitchen_drawer", "short_can"
    plan = ([(Action.GO_TO, "NoMaD", drawer, "")] * 3 + [(Action.OPEN, "octo", drawer, "")] * 4
            + [(Action.GO_TO, "PixNav", can, "")] * 3 + [(Action.PICK, "RT-1-X", can, "")] * 6
            + [(Action.GO_TO, "NoMaD", drawer, "")] * 4 + [(Action.PUT, "RT-1-X", can, drawer)] * 3)

    reference_sim = make_simulator("mujoco", render=False)
    try:
        reference_sim.reset(task.scene, seed=seed)
        skills = SkillSet(reference_sim, noise="emmoe_table4", seed=seed)
        expected = []
        for action, model, target, place in plan:
            reference_sim.reset_arm()
            result = skills.run(action, model, target, place)
            expected.append((result.status, result.detail))
        expected_held = reference_sim.state().held
    finally:
        reference_sim.shutdown()

    bridge = make_bridge("noise:=emmoe")
    assert bridge.noise == "emmoe_table4"
    for _episode in range(2):  # the second reset must replay the same draws
        _reset(bridge, task.scene, seed)
        got = []
        for action, model, target, place in plan:
            result, state = _attempt(bridge, action, model, target, place)
            got.append((result.status, result.detail))
        assert got == expected
        assert (state.held or None) == expected_held
    statuses = [status for status, _detail in got]
    assert any("execution noise" in detail for _status, detail in got), got
    assert SkillStatus.SUCCESS in statuses and SkillStatus.DROPPED in statuses, got  # a failed put lost the can


def test_bridge_model_handling(make_bridge):
    """Noiseless by default; an empty model runs as the oracle; a model no skill serves is a failed attempt
    with the reason, not a crash."""
    from homiebot.tasks.suite import get_task
    from homiebot.types import Action, SkillStatus

    task = get_task(SCENE_TASK)
    bridge = make_bridge()
    assert bridge.noise == "noiseless"
    _reset(bridge, task.scene, task.seed)
    result, _ = _attempt(bridge, Action.GO_TO, "", "kitchen_drawer")
    assert result.status is SkillStatus.SUCCESS
    result, _ = _attempt(bridge, Action.OPEN, "teleporter", "kitchen_drawer")
    assert result.status is SkillStatus.EXECUTION_FAILED and "teleporter" in result.detail


def test_bridge_refuses_an_unknown_preset(make_bridge):
    with pytest.raises(ValueError, match="unknown noise preset 'loud'"):
        make_bridge("noise:=loud")


def test_remote_skills_hand_the_robot_side_the_model_the_skill_layer_runs():
    """The executor node's runner answers serves / models_for from the skill layer's table, so the lenient
    executor substitutes a serving model ([Open, ...] with NoMaD runs with octo) and the goal carries it."""
    from homiebot.executor.executor import Executor
    from homiebot.ros.remote import RemoteSkills
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task
    from homiebot.types import ErrorCode, Subtask

    class RecordingProxy:
        """A RemoteSimulator stand-in over a local simulator: records the model each skill call carries."""

        def __init__(self, sim) -> None:
            self.sim, self.model, self.calls = sim, "", []

        def __getattr__(self, name):
            return getattr(self.sim, name)

        def _call(self, skill: str, *args):
            self.calls.append((skill, self.model))
            return getattr(self.sim, skill)(*args)

        def go_to(self, target):
            return self._call("go_to", target)

        def open(self, target):
            return self._call("open", target)

    task = get_task(SCENE_TASK)
    sim = make_simulator("mujoco", render=False)
    try:
        sim.reset(task.scene, seed=task.seed)
        proxy = RecordingProxy(sim)
        skills = RemoteSkills(proxy)  # type: ignore[arg-type]
        executor = Executor(proxy, skills=skills)  # type: ignore[arg-type]
        assert executor.execute(Subtask("Go to", "kitchen_drawer"), "PixNav", ()).code is ErrorCode.OK
        assert executor.execute(Subtask("Open", "kitchen_drawer"), "NoMaD", ()).code is ErrorCode.OK
    finally:
        sim.shutdown()
    assert proxy.calls == [("go_to", "PixNav"), ("open", "octo")]


def test_robot_model_only_for_the_embedded_simulator(make_bridge) -> None:
    """The URDF on /robot_description is the backend's own (``robot_kinematics``, which the MuJoCo backend has): a
    bridge over a backend without it (here the MuJoCo simulator behind a wrapper that hides the method) publishes
    no robot model and no arm links on /tf, rather than a wrong one."""
    import time

    import rclpy
    import rclpy.executors
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sim_bridge.node import SimBridge
    from std_msgs.msg import String

    mujoco_bridge = make_bridge()
    assert mujoco_bridge._kinematics is not None

    class OtherBackend:
        def __init__(self, inner) -> None:
            self._inner = inner

        def __getattr__(self, name):
            if name == "robot_kinematics":  # another robot's backend: it does not describe the MuJoCo one
                raise AttributeError(name)
            return getattr(self._inner, name)

    other = SimBridge(simulator=OtherBackend(mujoco_bridge.sim))
    try:
        assert other._kinematics is None
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        received: list = []
        listener = rclpy.create_node("robot_description_listener")
        listener.create_subscription(String, "/robot_description", received.append, latched)
        executor = rclpy.executors.SingleThreadedExecutor()
        for node in (listener, other, mujoco_bridge):
            executor.add_node(node)
        deadline = time.monotonic() + 5.0
        while len(received) < 1 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        for _ in range(20):  # a little longer: a second description would come from the other bridge
            executor.spin_once(timeout_sec=0.05)
        assert len(received) == 1 and received[0].data.startswith("<?xml")  # the MuJoCo bridge's only
        executor.shutdown()
        listener.destroy_node()
    finally:
        other.destroy_node()
