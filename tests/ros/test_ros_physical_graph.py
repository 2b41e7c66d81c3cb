"""The whole graph with ``--skills physical``: ``homie up sim --skills physical --record`` runs an episode whose Go to,
Pick and Put reach the robot only through the standard interfaces, and the bag shows it.

The bag holds each action's goal status topic (homiebot.ros.bag records ``<action>/_action/status``): the goals
every server took. With physical skills, NavigateToPose, FollowJointTrajectory and GripperCommand took goals and
the simulator's private skill actions (/sim/navigate, /sim/manipulate), whose servers were up and recorded, took
none. The same episode with the oracle skills is the contrast: there the private actions took every skill.

Task: emmoe-084 (apartment_1, "check if there are anything in the kitchen drawer, if its empty put a short can into
it", EMMOE's appendix-B demonstration): Go to, Open, Go to, Pick, Go to, Put *into* the drawer, Close. Open and Close
still move the drawer kinematically through /sim/manipulate under physical skills (docs/robots.md), so those two
are the private action's only goals there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from homiebot.testing.ros_helpers import graph_environment

pytestmark = pytest.mark.ros

HOMIE = str(Path(sys.executable).with_name("homie"))
TASK = "emmoe-084"
STANDARD = ("/navigate_to_pose", "/arm_controller/follow_joint_trajectory", "/gripper_controller/gripper_cmd")
PRIVATE = ("/sim/navigate", "/sim/manipulate")


@pytest.fixture(scope="module")
def episodes(tmp_path_factory, ros_domain) -> dict[str, Path]:
    """The task through the graph, recorded, with each skill setting."""
    tmp = tmp_path_factory.mktemp("physical_graph")
    env = {**graph_environment(ros_domain), "COLUMNS": "200"}
    out = {}
    for skills in ("physical", "oracle"):
        out[skills] = tmp / skills
        done = subprocess.run([HOMIE, "up", "sim", "--task", TASK, "--skills", skills, "--record", "--no-images", "--out", str(out[skills]),
                               "--domain-id", str(ros_domain)], capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    return out


def _bag_topics(bag: Path) -> set[str]:
    from homiebot.ros.bag import bag_info

    return {topic.name for topic in bag_info(bag).topics}


def test_physical_skills_use_only_the_standard_interfaces(episodes):
    from homiebot.ros.bag import action_goals

    run = episodes["physical"]
    rounds = [json.loads(line) for line in (run / "record" / "rounds.jsonl").read_text().splitlines()]
    assert [r["subtask_text"] for r in rounds] == [
        "[Go to, kitchen_drawer]", "[Open, kitchen_drawer]", "[Go to, short_can]", "[Pick, short_can]",
        "[Go to, kitchen_drawer]", "[Put, short_can, kitchen_drawer]", "[Close, kitchen_drawer]", "[End]"]
    assert all(r["error_code"] == "OK" for r in rounds), [(r["subtask_text"], r["feedback"]) for r in rounds]
    summary = json.loads((run / "record" / "summary.json").read_text())
    assert summary["success"]
    assert summary["run"]["skills"]["mode"] == "physical"  # the record names the skills the graph ran with
    goals = action_goals(run / "bag")
    topics = _bag_topics(run / "bag")
    for action in STANDARD + PRIVATE:
        assert f"{action}/_action/status" in topics, f"the bag has no status of {action}"
    assert len(goals.get("/navigate_to_pose", ())) >= 3  # one per Go to at least
    assert len(goals.get("/arm_controller/follow_joint_trajectory", ())) >= 6  # tucks, reach, approach, lift, ...
    assert len(goals.get("/gripper_controller/gripper_cmd", ())) >= 3  # open and close for the Pick, open for the Put
    assert not goals.get("/sim/navigate"), f"/sim/navigate took {len(goals['/sim/navigate'])} goal(s)"
    assert len(goals.get("/sim/manipulate", ())) == 2  # Open and Close only (module docstring)
    assert {"/joint_states", "/odom"} <= topics
    # With --no-images the bridge renders no reaching views (tests/ros/test_ros_reaching_views.py has them).
    from homiebot.ros.bag import bag_info

    assert not any(t.count for t in bag_info(run / "bag").topics if t.name.startswith("/reach_camera/"))
    assert not (run / "record" / "reaching.jsonl").exists()


def test_the_oracle_episode_goes_through_the_private_actions(episodes):
    from homiebot.ros.bag import action_goals

    goals = action_goals(episodes["oracle"] / "bag")
    assert len(goals.get("/sim/navigate", ())) == 3 and len(goals.get("/sim/manipulate", ())) == 4
    for action in STANDARD:
        assert not goals.get(action)
    # The oracle bridge serves no arm or gripper controller at all.
    topics = _bag_topics(episodes["oracle"] / "bag")
    assert "/arm_controller/follow_joint_trajectory/_action/status" not in topics


def test_physical_skills_through_perception_plan_with_perceptions_objects(tmp_path, ros_domain):
    """``--perception conceptgraph`` with physical skills: the executors plan with the objects perception has built
    from the views (homie_msgs/PerceiveWorld on /perception/perceive_world), as ``homie run`` does in-process; the
    episode still succeeds and the grasp is planned from the perceived box."""
    env = {**graph_environment(ros_domain), "COLUMNS": "200"}
    out = tmp_path / "perceived"
    done = subprocess.run([HOMIE, "up", "sim", "--task", TASK, "--skills", "physical", "--perception", "conceptgraph",
                           "--no-images", "--out", str(out), "--domain-id", str(ros_domain)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "record" / "summary.json").read_text())
    assert summary["success"], summary
    logs = {p.name: p.read_text(errors="replace") for p in (out / "logs").iterdir()}
    manip = next(text for name, text in logs.items() if name.startswith("manip_executor"))
    assert "the skills plan with perception's objects (/perception/perceive_world)" in manip
