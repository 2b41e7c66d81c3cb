"""The whole graph with ``--skills physical``: ``homie up sim --skills physical --record`` runs an episode whose Go to,
Pick, Put, Open and Close reach the robot only through the standard interfaces, and the bag shows it.

The bag holds each action's goal status topic (homiebot.ros.bag records ``<action>/_action/status``): the goals
every server took. With physical skills, NavigateToPose, FollowJointTrajectory and GripperCommand took goals and
the simulator's private skill actions (/sim/navigate, /sim/manipulate), whose servers were up and recorded, took
none. The same episode with the oracle skills is the contrast: there the private actions took every skill.

Task: emmoe-084 (apartment_1, "check if there are anything in the kitchen drawer, if its empty put a short can into
it", EMMOE's appendix-B demonstration): Go to, Open, Go to, Pick, Go to, Put *into* the drawer, Close. Open and Close
are the core's arm articulation in the manipulation executor (homiebot/ros/physical_skills.py): the drawer's handle
taken with GripperCommand goals and pulled and pushed with FollowJointTrajectory goals, while the executor's
/manipulate goal of that skill ran.
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


def _goal_spans(bag: Path) -> dict[str, list[tuple[int, int]]]:
    """Per action whose status the bag holds, each goal's (first status received, first terminal status received),
    in the recorder's clock (ns); a goal with no terminal status ends at the bag's last message."""
    from rosbags.typesys import Stores, get_typestore

    from homiebot.ros.bag import ACTION_STATUS_SUFFIX, read_messages

    store = get_typestore(Stores.ROS2_JAZZY)
    first: dict[tuple[str, bytes], int] = {}
    ended: dict[tuple[str, bytes], int] = {}
    last = 0
    for message in read_messages(bag):
        last = max(last, message.timestamp_ns)
        if not message.topic.endswith(ACTION_STATUS_SUFFIX):
            continue
        action = message.topic.removesuffix(ACTION_STATUS_SUFFIX)
        for status in store.deserialize_cdr(message.data, message.msgtype).status_list:
            key = (action, bytes(status.goal_info.goal_id.uuid))
            first.setdefault(key, message.timestamp_ns)
            if status.status in (4, 5, 6):  # action_msgs/GoalStatus SUCCEEDED, CANCELED, ABORTED
                ended.setdefault(key, message.timestamp_ns)
    spans: dict[str, list[tuple[int, int]]] = {}
    for key, start in first.items():
        spans.setdefault(key[0], []).append((start, ended.get(key, last)))
    return spans


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
    assert summary["run"]["skills"]["articulation"] == "physical"  # ... and the Open/Close default, as homie run's
    assert "Open and Close by articulation 'physical'" in (run / "logs" / "sim_bridge.log").read_text()
    goals = action_goals(run / "bag")
    topics = _bag_topics(run / "bag")
    for action in STANDARD + PRIVATE:
        assert f"{action}/_action/status" in topics, f"the bag has no status of {action}"
    assert len(goals.get("/navigate_to_pose", ())) >= 3  # one per Go to at least
    assert len(goals.get("/arm_controller/follow_joint_trajectory", ())) >= 6  # tucks, reach, approach, lift, ...
    assert len(goals.get("/gripper_controller/gripper_cmd", ())) >= 3  # open and close for the Pick, open for the Put
    assert not goals.get("/sim/navigate"), f"/sim/navigate took {len(goals['/sim/navigate'])} goal(s)"
    assert not goals.get("/sim/manipulate"), f"/sim/manipulate took {len(goals['/sim/manipulate'])} goal(s)"
    # The Open (the first /manipulate goal) and the Close (the last) moved the drawer through the standard interfaces:
    # the gripper opened and closed on the handle and the arm followed trajectories while each ran.
    spans = _goal_spans(run / "bag")
    manipulate = sorted(spans["/manipulate"])
    assert len(manipulate) >= 4, manipulate  # Open, Pick, Put, Close
    for skill, (start, end) in (("Open", manipulate[0]), ("Close", manipulate[-1])):
        for action, least in (("/gripper_controller/gripper_cmd", 2), ("/arm_controller/follow_joint_trajectory", 2)):
            inside = [s for s, _e in spans.get(action, ()) if start <= s <= end]
            assert len(inside) >= least, f"the {skill} sent {len(inside)} goal(s) to {action}"
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


def test_articulation_oracle_sends_open_and_close_to_the_bridges_skill_set(tmp_path, ros_domain):
    """``homie up sim --skills physical --articulation oracle``: the manipulation executor forwards Open and Close to
    /sim/manipulate, where the bridge's skill set (its ``articulation`` parameter) sets the joint; Go to, Pick and Put
    stay on the standard interfaces, and the record names the setting (docs/robots.md)."""
    from homiebot.ros.bag import action_goals

    env = {**graph_environment(ros_domain), "COLUMNS": "200"}
    out = tmp_path / "oracle_articulation"
    done = subprocess.run([HOMIE, "up", "sim", "--task", TASK, "--skills", "physical", "--articulation", "oracle",
                           "--record", "--no-images", "--out", str(out), "--domain-id", str(ros_domain)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "record" / "summary.json").read_text())
    assert summary["success"]
    assert summary["run"]["skills"]["articulation"] == "oracle"
    # The bridge's skill set, which runs the forwarded Open and Close, took the setting too.
    assert "Open and Close by articulation 'oracle'" in (out / "logs" / "sim_bridge.log").read_text()
    goals = action_goals(out / "bag")
    assert len(goals.get("/sim/manipulate", ())) == 2  # the Open and the Close, nothing else
    assert not goals.get("/sim/navigate")
    assert len(goals.get("/gripper_controller/gripper_cmd", ())) >= 3  # the Pick's and the Put's
    spans = _goal_spans(out / "bag")
    manipulate = sorted(spans["/manipulate"])
    for skill, (start, end) in (("Open", manipulate[0]), ("Close", manipulate[-1])):
        inside = [s for s, _e in spans.get("/gripper_controller/gripper_cmd", ()) if start <= s <= end]
        assert not inside, f"the {skill} sent {len(inside)} gripper goal(s): the arm moved the drawer"


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
