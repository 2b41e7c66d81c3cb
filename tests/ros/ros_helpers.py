"""Helpers shared by the ROS 2 tests (imported by name: tests/ros is put on sys.path by its conftest)."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable

DISCOVERY_RANGE = "LOCALHOST"


def graph_environment(domain: int) -> dict[str, str]:
    from homiebot.ros.environment import overlay_environment

    env = overlay_environment()
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE=DISCOVERY_RANGE, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    return env


class WireListener:
    """An rclpy node in its own context, spun in a thread, that keeps every message of some topics."""

    def __init__(self, topics: dict[str, tuple[type, object]]) -> None:
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
