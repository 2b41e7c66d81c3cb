"""A learned policy as its own node of the graph: ``homie up sim --skills physical --skill-model RT-1-X=DIR`` starts the
policy node (executor_nodes/policy_node.py), the manipulation executor forwards the planner's ``[Pick, X]`` with
``Model: RT-1-X`` to it, and it runs the policy through the robot's standard interfaces only: the skill cameras as
sensor_msgs/Image + CameraInfo, ``/joint_states``, ``/odom``, streamed targets on ``/arm_controller/joint_trajectory``
(trajectory_msgs/JointTrajectory) and the scripted skills' FollowJointTrajectory / GripperCommand / NavigateToPose
goals for its tuck and stance (docs/skills.md, "The policy as its own ROS 2 node").

The policy is a tiny ACT trained for two steps on one recorded Pick (as tests/skills/test_learned_skill.py trains its
own): it fails the Pick. What is checked is the path, from the bag (each action's goal status topic, and every topic's
message count) and the node's log: the policy ran for its budget on every one of the executor's three tries; the
executor answered E1 with EMMOE's message; the simulator's private skill actions took no goal.

Task emmoe-009 (apartment_2, "search a blue can for me"): Go to the blue can, then Pick it; the planner's rounds are
capped at 3 and the policy's budget at 5 steps to keep the run short.

Same behaviour in both wirings (DESIGN, principle 5): from the same start (the scene's seed, Go to the blue can), one
learned Pick in process (``LearnedArmSkill`` on the physics) and one through the graph (the sim bridge a process of
its own, the executors and the policy node here) give the policy the same observations (joints, target box, every
pixel of both cameras), so it takes the same actions, until the arm first touches something: the two starts differ
in the last bits (poses and goals went through messages), and contact amplifies that. When nothing is touched, they
end with the same message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
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
POLICY_ACTION = "/skill_policy/rt_1_x/manipulate"
LEROBOT_REASON = "lerobot is not importable (lerobot[dataset,training]==0.6.1 needs Python >= 3.12: docs/skill-data.md)"


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny ACT of 32-pixel cameras trained for two steps on one recorded Pick."""
    try:
        import lerobot.policies.act.modeling_act  # noqa: F401
    except ImportError:
        pytest.skip(LEROBOT_REASON)
    from typer.testing import CliRunner

    from homiebot.cli import build_app
    from homiebot.data.skill_datasets import record_skill_dataset

    tmp = tmp_path_factory.mktemp("policy")
    record_skill_dataset("pick", 1, tmp / "pick", size=32)
    done = CliRunner().invoke(build_app(), ["train", "skill", "--data", str(tmp / "pick"), "--preset", "tiny",
                                            "--max-steps", "2", "--batch-size", "2", "--out", str(tmp / "run")])
    assert done.exit_code == 0, done.output
    return tmp / "run" / "policy"


@pytest.fixture(scope="module")
def episode(policy: Path, tmp_path_factory: pytest.TempPathFactory, ros_domain: int) -> Path:
    tmp = tmp_path_factory.mktemp("policy_graph")
    params = yaml.safe_load((Path(__file__).parents[2] / "launch" / "config" / "homie.yaml").read_text())
    params["planner_node"]["ros__parameters"]["max_rounds"] = 3
    params["skill_policy_rt_1_x"] = {"ros__parameters": {"step_budget": BUDGET}}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**graph_environment(ros_domain), "COLUMNS": "200"}
    out = tmp / "run"
    done = subprocess.run([HOMIE, "up", "sim", "--task", TASK, "--skills", "physical", "--skill-model",
                           f"RT-1-X={policy}", "--params", str(tmp / "params.yaml"), "--record", "--no-images",
                           "--out", str(out), "--domain-id", str(ros_domain)],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_policy_node_runs_the_pick_through_the_standard_interfaces_and_the_executor_answers_e1(
        episode: Path, policy: Path) -> None:
    from homiebot.ros.bag import action_goals, bag_info

    summary = json.loads((episode / "record" / "summary.json").read_text())
    assert summary["run"]["skills"] == {"mode": "physical", "noise": "off", "models": {"RT-1-X": str(policy)},
                                        "articulation": "physical"}  # the Open/Close default, as homie run's record
    rounds = [json.loads(line) for line in (episode / "record" / "rounds.jsonl").read_text().splitlines()]
    picks = [r for r in rounds if r["subtask_text"] == "[Pick, blue_can]"]
    assert picks, [(r["subtask_text"], r["feedback"]) for r in rounds]
    assert all(r["model"] == "RT-1-X" for r in picks)
    for pick in picks:  # the untrained policy fails every try: E1 with EMMOE's message after the third
        assert pick["error_code"] == "E1", pick
        assert pick["feedback"] == "Unable to pick, the subtask is too difficult to perform", pick
        assert pick["attempts"] == TRIES, pick

    goals = action_goals(episode / "bag")
    counts = {topic.name: topic.count for topic in bag_info(episode / "bag").topics}
    tries = TRIES * len(picks)
    assert len(goals.get(POLICY_ACTION, ())) == tries  # every try of the executor's went to the policy node
    # Per try one command that starts the stream, then one per policy step (the budget, or fewer when blocked).
    streamed = counts.get("/arm_controller/joint_trajectory", 0)
    assert 2 * tries <= streamed <= (BUDGET + 1) * tries, counts
    for camera in ("head", "wrist"):  # a frame of each camera per command, with its camera info
        assert counts.get(f"/skill_camera/{camera}/image_raw", 0) == streamed, counts
        assert counts.get(f"/skill_camera/{camera}/camera_info", 0) == streamed, counts
    # The tucks, the gripper's opening after each failure and Go to: the standard actions.
    assert goals.get("/gripper_controller/gripper_cmd") and goals.get("/navigate_to_pose")
    # Nothing went to the simulator's private skill actions (their status topics were up and recorded).
    for private in ("/sim/navigate", "/sim/manipulate"):
        assert f"{private}/_action/status" in counts and not goals.get(private), private

    logs = {p.name: p.read_text(errors="replace") for p in (episode / "logs").iterdir()}
    node_log = next(text for name, text in logs.items() if name.startswith("skill_policy_rt_1_x"))
    assert "RT-1-X policy (act," in node_log and "cameras head, wrist at 32 px" in node_log
    outcomes = [line for line in node_log.splitlines() if "RT-1-X policy: " in line]
    assert len(outcomes) == tries, outcomes
    assert all(("timed out: the RT-1-X policy" in line or "the arm stopped while the RT-1-X policy" in line
                or "grasp missed" in line) for line in outcomes), outcomes


class _Seen:
    """The policy, with what it was given and what it answered at every step."""

    def __init__(self, policy) -> None:  # type: ignore[no-untyped-def]
        self.policy, self.inputs, self.steps = policy, policy.inputs, []  # type: ignore[var-annotated]
        self.touching = lambda: None  # in process: what the arm touches, at every step
        self.touched: list[str | None] = []

    def reset(self) -> None:
        self.policy.reset()

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        self.touched.append(self.touching())
        action = self.policy.act(images, state, env_state)
        self.steps.append(({c: np.array(i) for c, i in images.items()}, np.array(state), np.array(env_state), action))
        return action


def test_one_learned_pick_through_the_graph_is_the_in_process_one(policy: Path, ros_domain: int) -> None:
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.skills.learned import SkillPolicy
    from homiebot.skills.learned_skill import LearnedArmSkill
    from homiebot.skills.physical import PhysicalSkillSet
    from homiebot.tasks.suite import get_task
    from homiebot.types import Action

    task, budget = get_task(TASK), 6
    sim = MujocoSimulator()
    sim.reset(task.scene, seed=task.seed)
    alone = _Seen(SkillPolicy(policy))
    learned = LearnedArmSkill("RT-1-X", None, policy=alone, step_budget=budget)
    skills = PhysicalSkillSet(sim, seed=task.seed, learned={"RT-1-X": learned})
    alone.touching = skills.driver.touching
    sim.use_physical_arm()
    try:
        assert skills.run(Action.GO_TO, "PixNav", "blue_can").success
        sim.reset_arm()  # as the executor does before a try
        in_process = skills.run(Action.PICK, "RT-1-X", "blue_can")
    finally:
        learned.close()
        sim.shutdown()

    import rclpy
    from homie_msgs.action import Manipulate, Navigate
    from rclpy.action import ActionClient
    from rclpy.executors import MultiThreadedExecutor

    from homiebot.ros.calls import call_action

    # The bridge renders in its own process (its OpenGL context belongs to the thread that spins it).
    bridge = subprocess.Popen([sys.executable, "-m", "sim_bridge.node", "--ros-args", "-p", "skills:=physical", "-p",
                               f"scene:={task.scene}", "-p", f"seed:={task.seed}", "-p", "skill_camera_size:=32",
                               "-p", "publish_camera_topics:=false", "-p", "prerender:=false"],
                              env=graph_environment(ros_domain))
    rclpy.init(args=["--ros-args", "-p", "skills:=physical", "-p", f"policy:={policy}", "-p", "model:=RT-1-X",
                     "-p", f"step_budget:={budget}", "-p", f"learned_skills:=RT-1-X={POLICY_ACTION}"])
    executor = MultiThreadedExecutor(num_threads=4)
    try:
        from executor_nodes.policy_node import PolicyNode
        from executor_nodes.skill_executors import SkillExecutorNode

        nav = SkillExecutorNode("nav_executor", Navigate, "/navigate", "/sim/navigate", ["oracle"])
        manip = SkillExecutorNode("manip_executor", Manipulate, "/manipulate", "/sim/manipulate", ["oracle"])
        node = PolicyNode()
        graph = node.learned.policy = _Seen(node.learned.policy)
        client = rclpy.create_node("policy_fidelity_client")
        for each in (nav, manip, node, client):
            executor.add_node(each)
        threading.Thread(target=executor.spin, daemon=True).start()
        went = call_action(ActionClient(client, Navigate, "/navigate"), Navigate.Goal(target="blue_can", model="PixNav"), 300)
        assert went.result.status == 0, went.result.detail
        picked = call_action(ActionClient(client, Manipulate, "/manipulate"), Manipulate.Goal(
            operation=Manipulate.Goal.PICK, object="blue_can", model="RT-1-X", reset_arm_first=True), 300)
    finally:
        executor.shutdown()
        rclpy.try_shutdown()
        bridge.terminate()
        bridge.wait(30)

    # Every step before the arm first touches something is the same to the last pixel. The two simulators start the
    # Pick in states equal to about 1e-15 (the graph's goals and poses went through messages: quaternions, durations),
    # which free motion keeps there and contact amplifies (1e-3 rad within a period of touching the can, for this
    # tiny policy); past the first touch the two runs are two runs of one policy in one scene, no longer one.
    touched = next((step for step, what in enumerate(alone.touched) if what is not None), None)
    same = len(alone.steps) if touched is None else touched
    assert same >= 3, f"the arm touched {alone.touched[touched or 0]} at step {touched}: nothing left to compare"
    assert len(graph.steps) >= same
    for step, (a, b) in enumerate(zip(alone.steps[:same], graph.steps[:same], strict=True)):
        for camera in ("head", "wrist"):
            assert np.array_equal(a[0][camera], b[0][camera]), (step, camera)
        np.testing.assert_allclose(b[1], a[1], atol=1e-6, err_msg=f"joints at step {step}")
        np.testing.assert_allclose(b[2], a[2], atol=1e-6, err_msg=f"target box at step {step}")
        np.testing.assert_allclose(b[3], a[3], atol=1e-5, err_msg=f"action at step {step}")
    assert picked.result.status != 0 and not in_process.success  # the untrained policy fails the Pick both ways
    if touched is None:  # nothing touched: one run, to the message
        assert len(alone.steps) == len(graph.steps) == budget
        assert picked.result.detail == in_process.detail, (picked.result.detail, in_process.detail)
