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
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_the_policy_node_runs_the_pick_through_the_standard_interfaces_and_the_executor_answers_e1(episode: Path) -> None:
    from homiebot.ros.bag import action_goals, bag_info

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
