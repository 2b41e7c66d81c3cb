"""A learned Go to as its own node of the graph: ``homie up sim --skills physical --skill-model PixNav=DIR`` starts the
policy node (executor_nodes/policy_node.py) for the navigation slot, the navigation executor forwards the planner's
``[Go to, X]`` with ``Model: PixNav`` to it (homie_msgs/Navigate), and it runs the policy through the robot's
interfaces only: the goal photo asked for on ``/skill_camera/goal/pose`` (geometry_msgs/PoseStamped) and answered on
``/skill_camera/goal/image_raw``, the head camera (``/skill_camera/head/image_raw``), ``/odom``, and the base's velocity
commands on ``/cmd_vel`` (geometry_msgs/Twist), which the sim bridge holds for one control period each (docs/skills.md,
"A Go to policy in the graph").

The policy is a tiny ACT trained for two steps on one recorded Go to (as tests/skills/test_learned_goto.py trains its
own): it does not arrive. What is checked is the path, from the bag (each action's goal status topic, every topic's
message count) and the node's log: the policy ran for its budget on every one of the executor's three tries, twists
went out on /cmd_vel and each try ended with one zero twist (the base stopped), the executor answered E1 with EMMOE's
message, and neither the simulator's private skill action nor Nav2's NavigateToPose took a goal.

Task emmoe-009 (apartment_2, "search a blue can for me"): the expert's first subtask is Go to the blue can with PixNav;
the planner's rounds are capped at 1 and the policy's budget at 5 steps to keep the run short.

Same behaviour in both wirings (DESIGN, principle 5): from the same start (the scene's seed), one learned Go to in
process (``LearnedGoTo`` on the simulator) and one through the graph (the sim bridge a process of its own, the
navigation executor and the policy node here) give the policy the same observations (every pixel of the head camera
and of the goal photo, the goal pose in the base's frame), so it takes the same actions and the base ends where it
ended in process, with the same message; the stop at the run's end costs no simulated time (the clock after it is the
in-process one). Then two Go tos sent to the node: one cancelled after three twists is answered canceled, and one a
steering stand-in brings to the goal succeeds; between them, one sent to the navigation executor and cancelled there,
which passes the cancel on to the node: answered canceled too. Each ends with one zero twist.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from homiebot.testing.ros_helpers import graph_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

HOMIE = str(Path(sys.executable).with_name("homie"))
TASK = "emmoe-009"
BUDGET = 5
TRIES = 3  # EMMOE's tries per subtask (the executor's max_tries)
POLICY_ACTION = "/skill_policy/pixnav/navigate"
LEROBOT_REASON = "lerobot is not importable (lerobot[dataset,training]==0.6.1 needs Python >= 3.12: docs/skill-data.md)"


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny ACT of 32-pixel cameras (head and goal, the goal pose) trained for two steps on one recorded Go to."""
    try:
        import lerobot.policies.act.modeling_act  # noqa: F401
    except ImportError:
        pytest.skip(LEROBOT_REASON)
    from typer.testing import CliRunner

    from homiebot.cli import build_app
    from homiebot.data.skill_datasets import record_skill_dataset

    tmp = tmp_path_factory.mktemp("goto_policy")
    record_skill_dataset("go_to", 1, tmp / "go_to", size=32)
    done = CliRunner().invoke(build_app(), ["train", "skill", "--data", str(tmp / "go_to"), "--preset", "tiny",
                                            "--max-steps", "2", "--batch-size", "2", "--out", str(tmp / "run")])
    assert done.exit_code == 0, done.output
    return tmp / "run" / "policy"


@pytest.fixture(scope="module")
def episode(policy: Path, tmp_path_factory: pytest.TempPathFactory, ros_domain: int) -> Path:
    tmp = tmp_path_factory.mktemp("goto_graph")
    params = yaml.safe_load((Path(__file__).parents[2] / "launch" / "config" / "homie.yaml").read_text())
    params["planner_node"]["ros__parameters"]["max_rounds"] = 1
    params["skill_policy_pixnav"] = {"ros__parameters": {"step_budget": BUDGET}}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**graph_environment(ros_domain), "COLUMNS": "200"}
    out = tmp / "run"
    done = subprocess.run([HOMIE, "up", "sim", "--task", TASK, "--skills", "physical", "--skill-model",
                           f"PixNav={policy}", "--params", str(tmp / "params.yaml"), "--record", "--no-images",
                           "--out", str(out), "--domain-id", str(ros_domain)],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_policy_node_drives_the_go_to_on_cmd_vel_and_the_executor_answers_e1(episode: Path, policy: Path) -> None:
    from homiebot.ros.bag import action_goals, bag_info, read_messages

    summary = json.loads((episode / "record" / "summary.json").read_text())
    assert summary["run"]["skills"]["models"] == {"PixNav": str(policy)}
    rounds = [json.loads(line) for line in (episode / "record" / "rounds.jsonl").read_text().splitlines()]
    go_tos = [r for r in rounds if r["subtask_text"] == "[Go to, blue_can]"]
    assert go_tos, [(r["subtask_text"], r["feedback"]) for r in rounds]
    for go_to in go_tos:  # the untrained policy does not arrive in 5 steps: E1 with EMMOE's message after the third
        assert go_to["model"] == "PixNav", go_to
        assert go_to["error_code"] == "E1", go_to
        assert go_to["feedback"].endswith("the subtask is too difficult to perform"), go_to
        assert go_to["attempts"] == TRIES, go_to

    goals = action_goals(episode / "bag")
    counts = {topic.name: topic.count for topic in bag_info(episode / "bag").topics}
    tries = TRIES * len(go_tos)
    assert len(goals.get(POLICY_ACTION, ())) == tries  # every try of the executor's went to the policy node
    twists = counts.get("/cmd_vel", 0)
    assert tries <= twists - tries <= BUDGET * tries, counts  # one twist a policy step, and one stop a try
    # Per try one goal photo, and one head frame to start with and one after every twist, the stop's included.
    assert counts.get("/skill_camera/goal/pose", 0) == tries, counts
    assert counts.get("/skill_camera/goal/image_raw", 0) == tries, counts
    assert counts.get("/skill_camera/head/image_raw", 0) == twists + tries, counts
    # Every try (its goal photo's request to the next one's) ends with exactly one zero twist: the base stopped.
    from geometry_msgs.msg import PoseStamped, Twist
    from rclpy.serialization import deserialize_message

    runs: list[list[tuple[float, float]]] = []
    for message in read_messages(episode / "bag", ["/cmd_vel", "/skill_camera/goal/pose"]):
        if message.topic == "/skill_camera/goal/pose":
            deserialize_message(message.data, PoseStamped)
            runs.append([])
        else:
            twist = deserialize_message(message.data, Twist)
            runs[-1].append((twist.linear.x, twist.angular.z))
    assert len(runs) == tries, runs
    for run in runs:  # the tiny policy's actions are never exactly zero: the one zero twist is the stop
        assert len(run) >= 2 and run[-1] == (0.0, 0.0) and (0.0, 0.0) not in run[:-1], run
    # The base moved only on /cmd_vel: nothing went to the simulator's private Go to nor to NavigateToPose.
    for other in ("/sim/navigate", "/navigate_to_pose"):
        assert f"{other}/_action/status" in counts and not goals.get(other), other

    logs = {p.name: p.read_text(errors="replace") for p in (episode / "logs").iterdir()}
    node_log = next(text for name, text in logs.items() if name.startswith("skill_policy_pixnav"))
    assert "PixNav policy (act," in node_log and "Go to, cameras head, goal at 32 px" in node_log
    outcomes = [line for line in node_log.splitlines() if "PixNav policy: " in line]
    assert len(outcomes) == tries, outcomes
    assert all(f"budget of {BUDGET} steps" in line or "stopped short" in line for line in outcomes), outcomes


class _Seen:
    """The policy, with what it was given and what it answered at every step."""

    def __init__(self, policy) -> None:  # type: ignore[no-untyped-def]
        self.policy, self.inputs, self.steps = policy, policy.inputs, []  # type: ignore[var-annotated]

    def reset(self) -> None:
        self.policy.reset()

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        action = self.policy.act(images, state, env_state)
        self.steps.append(({c: np.array(i) for c, i in images.items()}, np.array(state), np.asarray(action)))
        return action


def test_one_learned_go_to_through_the_graph_is_the_in_process_one(policy: Path, ros_domain: int) -> None:
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.skills.learned import SkillPolicy
    from homiebot.skills.learned_goto import LearnedGoTo
    from homiebot.skills.physical import PhysicalSkillSet
    from homiebot.tasks.suite import get_task
    from homiebot.types import Action

    task, budget = get_task(TASK), 6
    sim = MujocoSimulator()
    sim.reset(task.scene, seed=task.seed)
    alone = _Seen(SkillPolicy(policy))
    learned = LearnedGoTo("PixNav", None, policy=alone, step_budget=budget)
    skills = PhysicalSkillSet(sim, seed=task.seed, learned={"PixNav": learned})
    sim.use_physical_arm()
    try:
        sim.reset_arm()  # as the executor does before a try
        in_process = skills.run(Action.GO_TO, "PixNav", "blue_can")
        end_in_process = sim.base_pose()
        clock_in_process = sim.sim_time
    finally:
        learned.close()
        sim.shutdown()

    import rclpy
    from geometry_msgs.msg import Twist
    from homie_msgs.action import Navigate
    from homie_msgs.srv import GetWorldState
    from rclpy.action import ActionClient
    from rclpy.executors import MultiThreadedExecutor
    from sensor_msgs.msg import Image

    from homiebot.ros import convert
    from homiebot.ros.calls import SENSOR_QOS, call_action, call_service
    from homiebot.ros.policy_skill import STREAM_QOS

    # The bridge renders in its own process (its OpenGL context belongs to the thread that spins it).
    bridge = subprocess.Popen([sys.executable, "-m", "sim_bridge.node", "--ros-args", "-p", "skills:=physical", "-p",
                               f"scene:={task.scene}", "-p", f"seed:={task.seed}", "-p", "skill_camera_size:=32",
                               "-p", "publish_camera_topics:=false", "-p", "prerender:=false"],
                              env=graph_environment(ros_domain))
    rclpy.init(args=["--ros-args", "-p", "skills:=physical", "-p", f"policy:={policy}", "-p", "model:=PixNav",
                     "-p", f"step_budget:={budget}", "-p", f"learned_skills:=PixNav={POLICY_ACTION}"])
    executor = MultiThreadedExecutor(num_threads=4)
    try:
        from executor_nodes.policy_node import PolicyNode
        from executor_nodes.skill_executors import SkillExecutorNode

        nav = SkillExecutorNode("nav_executor", Navigate, "/navigate", "/sim/navigate", ["oracle"])
        node = PolicyNode()
        graph = node.learned.policy = _Seen(node.learned.policy)
        client = rclpy.create_node("policy_goto_fidelity_client")
        commands: list[tuple[float, float]] = []
        heads: list[float] = []
        client.create_subscription(Twist, "/cmd_vel", lambda m: commands.append((m.linear.x, m.angular.z)), STREAM_QOS)
        client.create_subscription(Image, "/skill_camera/head/image_raw",
                                   lambda m: heads.append(convert.time_seconds(m.header.stamp)), SENSOR_QOS)
        state = client.create_client(GetWorldState, "/sim/get_world_state")
        for each in (nav, node, client):
            executor.add_node(each)
        threading.Thread(target=executor.spin, daemon=True).start()
        went = call_action(ActionClient(client, Navigate, "/navigate"),
                           Navigate.Goal(target="blue_can", model="PixNav", reset_arm_first=True), 300)
        twists, stops = node.learned.stream.sent, node.learned.stream.stops
        end_clock = convert.time_seconds(went.state.header.stamp)
        # The bridge answers the stop with the state as it is: a second frame stamped when the last period ended.
        deadline = time.monotonic() + 20
        while heads.count(end_clock) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        after_stop = call_service(state, GetWorldState.Request(), 30).state
        told, frames = list(commands), list(heads)
        cancelled = _go_to_on_the_node(node, client, commands, _Turn(node.learned.policy), cancel_after=3)
        # The same cancel sent to the navigation executor, which forwarded the Go to: it reaches the policy node.
        through_executor = _go_to_on_the_node(node, client, commands, _Turn(node.learned.policy), cancel_after=3,
                                              action_name="/navigate")
        arrived = _go_to_on_the_node(node, client, commands, _Steer(node.learned.policy))
    finally:
        executor.shutdown()
        rclpy.try_shutdown()
        bridge.terminate()
        bridge.wait(30)

    assert len(alone.steps) == len(graph.steps) == budget == twists
    for step, (a, b) in enumerate(zip(alone.steps, graph.steps, strict=True)):
        for camera in ("head", "goal"):
            assert np.array_equal(a[0][camera], b[0][camera]), (step, camera)
        np.testing.assert_allclose(b[1], a[1], atol=1e-5, err_msg=f"goal pose in the base's frame at step {step}")
        np.testing.assert_allclose(b[2], a[2], atol=1e-5, err_msg=f"action at step {step}")
    assert went.result.detail == in_process.detail, (went.result.detail, in_process.detail)
    end = went.state.robot_pose
    assert abs(end.position.x - end_in_process.x) < 1e-6 and abs(end.position.y - end_in_process.y) < 1e-6
    # The run ended with one zero twist, which the bridge took as a stop: no period, the clock and the base where the
    # in-process Go to left them (the embedded base holds no command and ends at rest without a stop).
    assert stops == 1 and told[-1] == (0.0, 0.0) and told.count((0.0, 0.0)) == 1, told
    assert end_clock == pytest.approx(clock_in_process, abs=1e-6), (end_clock, clock_in_process)
    assert frames.count(end_clock) == 2 and max(frames) == end_clock, frames
    assert convert.time_seconds(after_stop.header.stamp) == pytest.approx(clock_in_process, abs=1e-6)
    assert after_stop.robot_pose == went.state.robot_pose
    status, detail, sent, told = cancelled  # a Go to cancelled over ROS: answered canceled, the base stopped
    assert status == "canceled" and detail.startswith("cancelled: the PixNav policy's Go to blue_can was stopped"), (
        status, detail)
    assert 3 <= sent < 600 and told[-1] == (0.0, 0.0) and told.count((0.0, 0.0)) == 1, told
    status, detail, sent, told = arrived  # one that arrives: succeeded, and the base stopped there
    assert status == "succeeded" and detail.startswith("reached blue_can"), (status, detail)
    assert 0 < sent < 600 and told[-1] == (0.0, 0.0) and told.count((0.0, 0.0)) == 1, told
    status, detail, sent, told = through_executor  # cancelled at the executor: canceled there with the node's result
    assert status == "canceled" and detail.startswith("cancelled: the PixNav policy's Go to blue_can was stopped"), (
        status, detail)
    assert 3 <= sent < 600 and told[-1] == (0.0, 0.0) and told.count((0.0, 0.0)) == 1, told


class _Turn:
    """A policy that turns the base on the spot (never still, never stopped short): it runs until cancelled."""

    def __init__(self, policy) -> None:  # type: ignore[no-untyped-def]
        self.inputs = policy.inputs

    def reset(self) -> None: ...

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        return np.array([0.0, 0.5])


class _Steer:
    """A policy that steers the base to the goal pose it is given (its state: the goal in the base's frame)."""

    def __init__(self, policy) -> None:  # type: ignore[no-untyped-def]
        self.inputs = policy.inputs

    def reset(self) -> None: ...

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        import math

        x, y, yaw = (float(v) for v in state)
        if math.hypot(x, y) > 0.1:
            bearing = math.atan2(y, x)
            return np.array([0.6 if abs(bearing) < 0.3 else 0.0, float(np.clip(2 * bearing, -1, 1))])
        return np.array([0.0, float(np.clip(2 * yaw, -1, 1))])


def _go_to_on_the_node(node, client, commands, policy, cancel_after: int | None = None,  # type: ignore[no-untyped-def]
                       action_name: str = POLICY_ACTION):
    """A Go to blue_can sent to ``action_name`` (the policy node's action, or the navigation executor's, which
    forwards it there), run by ``policy`` with a budget of 600 steps, cancelled after its ``cancel_after``-th twist if
    given: its status, its result's message, the twists it sent and what /cmd_vel carried from its start."""
    from action_msgs.msg import GoalStatus
    from homie_msgs.action import Navigate
    from rclpy.action import ActionClient

    from homiebot.skills.learned_goto import BaseLimits

    node.learned.policy, node.learned.limits = policy, BaseLimits(step_budget=600)
    stream, start = node.learned.stream, len(commands)
    sent = stream.sent
    action = ActionClient(client, Navigate, action_name)
    assert action.wait_for_server(timeout_sec=30)
    accepted = action.send_goal_async(Navigate.Goal(target="blue_can", model="PixNav"))
    deadline = time.monotonic() + 120
    while not accepted.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    handle = accepted.result()
    if cancel_after is not None:
        while stream.sent < sent + cancel_after and time.monotonic() < deadline:
            time.sleep(0.005)
        handle.cancel_goal_async()
    result = handle.get_result_async()
    while not result.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # the stop's delivery to this node's subscription
    names = {GoalStatus.STATUS_CANCELED: "canceled", GoalStatus.STATUS_SUCCEEDED: "succeeded",
             GoalStatus.STATUS_ABORTED: "aborted"}
    answer = result.result()
    return (names.get(answer.status, str(answer.status)), answer.result.result.detail, stream.sent - sent,
            commands[start:])
