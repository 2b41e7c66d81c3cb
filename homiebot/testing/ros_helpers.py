"""Helpers shared by the ROS 2 tests: graph environments, wire listeners, a pick episode through the bridge."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rclpy is imported where a helper runs: the module loads without ROS 2
    from rclpy.qos import QoSProfile

DISCOVERY_RANGE = "LOCALHOST"


def graph_environment(domain: int) -> dict[str, str]:
    from homiebot.ros.environment import overlay_environment

    env = overlay_environment()
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE=DISCOVERY_RANGE, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    return env


class WireListener:
    """An rclpy node in its own context, spun in a thread, that keeps every message of some topics."""

    def __init__(self, topics: Mapping[str, tuple[type, QoSProfile | int]]) -> None:
        import rclpy
        import rclpy.executors

        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"test_listener_{os.getpid()}", context=self.context)
        self.messages: dict[str, list] = defaultdict(list)
        self.stamps: dict[str, list[float]] = defaultdict(list)
        self._lock = threading.Lock()
        for topic, (msg_type, qos) in topics.items():
            self.node.create_subscription(msg_type, topic, self._callback(topic), qos)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _callback(self, topic: str) -> Callable:
        def on_message(msg) -> None:
            with self._lock:
                self.messages[topic].append(msg)
                self.stamps[topic].append(time.monotonic())

        return on_message

    def _spin(self) -> None:
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # the context is shutting down
                break

    def get(self, topic: str) -> list:
        with self._lock:
            return list(self.messages[topic])

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        return predicate()

    def close(self) -> None:
        self._rclpy.try_shutdown(context=self.context)
        self._thread.join(timeout=5)
        self.executor.shutdown()
        self.node.destroy_node()


# ------------------------------------------------------------------------- the sim bridge's frames on the wire

#: The episode :func:`bridge_pick_episode` drives: go to the table, pick the can.
PICK_SCENE, PICK_OBJECT, PICK_RECEPTACLE = "apartment_1", "green_can", "brown_table"


def message_stamp(msg):
    """A /tf message's stamp (its transforms', all alike) or a stamped message's header stamp."""
    return msg.transforms[0].header.stamp if hasattr(msg, "transforms") else msg.header.stamp


def tf_edges(tf_messages) -> dict:
    """(parent, child) -> the latest 4x4 transform between them, over TFMessages."""
    from geometry_msgs.msg import Pose

    from homiebot.ros import convert

    edges = {}
    for msg in tf_messages:
        for t in msg.transforms:
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (t.transform.translation.x, t.transform.translation.y,
                                                                 t.transform.translation.z)
            pose.orientation = t.transform.rotation
            edges[(t.header.frame_id, t.child_frame_id)] = convert.pose_to_matrix(pose)
    return edges


class TopicClient:
    """An rclpy node in its own context, spun from the test's thread (textbook single-threaded use), that keeps
    every message of some topics: ``{topic: (msg_type, qos)}``."""

    def __init__(self, name: str, topics: Mapping[str, tuple[type, QoSProfile | int]]) -> None:
        import rclpy
        import rclpy.executors

        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.messages: dict[str, list] = {topic: [] for topic in topics}
        for topic, (msg_type, qos) in topics.items():
            self.node.create_subscription(msg_type, topic, self.messages[topic].append, qos)

    def wait(self, future, timeout_s: float):
        self.executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        assert future.done(), "no answer from the sim bridge"
        return future.result()

    def at(self, stamp, topic: str) -> list:
        """The messages of ``topic`` stamped ``stamp``."""
        return [m for m in self.messages[topic] if message_stamp(m) == stamp]

    def spin_until(self, predicate: Callable[[], object], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate() and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.05)
        return bool(predicate())

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)


def bridge_pick_episode(tmp_path, domain: int) -> dict:
    """The sim bridge alone in its own process; a client that joins once it runs (a late joiner: it gets the
    latched /robot_description and /tf_static) resets, looks, goes to the table, picks the can and looks again.

    Returns, per look (``before`` / ``after``): ``views_<key>`` (the MultiView), ``joints_<key>`` (the
    /joint_states of the rendered instant) and ``tf_<key>`` (every /tf message of that instant: the base chain
    and the robot links); and ``tf_static``, ``paths`` (/sim/path), ``clock`` and ``descriptions``
    (/robot_description) as received.
    """
    from homie_msgs.action import Manipulate, Navigate
    from homie_msgs.srv import RenderViews, ResetEpisode
    from nav_msgs.msg import Path
    from rclpy.action import ActionClient
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from tf2_msgs.msg import TFMessage

    from homiebot.ros import convert
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph

    reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    # What tf2_ros's static listener and rviz's RobotModel (transient local in launch/rviz/homie.rviz) ask for.
    latched = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    topics = {"/tf": (TFMessage, reliable), "/tf_static": (TFMessage, latched), "/joint_states": (JointState, reliable),
              "/sim/path": (Path, latched), "/clock": (Clock, reliable), "/robot_description": (String, latched)}
    nodes = [n for n in load_graph().nodes if n.name == "sim_bridge"]
    supervisor = Supervisor(GraphSpec(nodes=nodes), overrides={"sim_bridge": {"render": False}},
                            env=graph_environment(domain), log_dir=tmp_path / "logs")
    client = None
    record: dict = {}
    try:
        supervisor.start()
        client = TopicClient("bridge_episode_client", topics)
        reset = client.node.create_client(ResetEpisode, "/sim/reset")
        render = client.node.create_client(RenderViews, "/sim/render_views")
        assert reset.wait_for_service(timeout_sec=60) and render.wait_for_service(timeout_sec=60)
        # Published once at start-up, before this client existed: received only because it is latched.
        assert client.spin_until(lambda: client.messages["/robot_description"], 10.0), "no /robot_description"
        assert client.wait(reset.call_async(ResetEpisode.Request(scene=PICK_SCENE, seed=0)), 60).success

        def look(key: str) -> None:
            """Render until the bridge (which sends /tf and /joint_states only to matched subscribers) has sent
            both for the rendered instant (same stamp: the simulation time): the joints, and the base chain and
            the robot links on /tf (two messages)."""
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                views = client.wait(render.call_async(RenderViews.Request()), 30).views
                stamp = views.header.stamp
                if client.spin_until(lambda: client.at(stamp, "/joint_states") and len(client.at(stamp, "/tf")) >= 2, 0.5):  # noqa: B023
                    record[f"views_{key}"] = views
                    record[f"joints_{key}"] = client.at(stamp, "/joint_states")[-1]
                    record[f"tf_{key}"] = client.at(stamp, "/tf")
                    return
            raise AssertionError("no /joint_states or /tf from the sim bridge")

        look("before")
        navigate = ActionClient(client.node, Navigate, "/sim/navigate")
        manipulate = ActionClient(client.node, Manipulate, "/sim/manipulate")
        assert navigate.wait_for_server(timeout_sec=30) and manipulate.wait_for_server(timeout_sec=30)
        for action, goal in ((navigate, Navigate.Goal(target=PICK_RECEPTACLE, reset_arm_first=True)),
                             (manipulate, Manipulate.Goal(operation=Manipulate.Goal.PICK, object=PICK_OBJECT))):
            handle = client.wait(action.send_goal_async(goal), 30)
            assert handle.accepted
            result = client.wait(handle.get_result_async(), 60).result
            assert convert.skill_result_from_msg(result.result).success, result.result
        look("after")
        client.spin_until(lambda: client.messages["/tf_static"], 5.0)
        after = record["views_after"].header.stamp
        client.spin_until(lambda: any(m.header.stamp == after for m in client.messages["/sim/path"]), 5.0)
        for key, topic in (("tf_static", "/tf_static"), ("paths", "/sim/path"), ("clock", "/clock"),
                           ("descriptions", "/robot_description")):
            record[key] = list(client.messages[topic])
    finally:
        codes = stop_graph(supervisor, client)
    assert_clean_exit(codes, tmp_path / "logs")
    return record


def stop_graph(supervisor, client: TopicClient | None) -> dict:
    """Close the test's client and stop the graph; the nodes' exit codes."""
    if client is not None:
        client.close()
    return supervisor.stop()


def assert_clean_exit(codes: dict, log_dir) -> None:
    """Every node exited 0 (else the end of their logs)."""
    logs = "\n".join(p.read_text()[-3000:] for p in log_dir.glob("*.log"))
    assert all(code == 0 for code in codes.values()), f"{codes}\n{logs}"
