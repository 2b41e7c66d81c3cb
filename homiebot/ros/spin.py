"""The one ``main`` every long-running node shares: logging, rclpy init, a single-threaded executor, clean exit.

Single-threaded on purpose: the sim bridge's OpenGL context belongs to the thread that made it current, and
rclpy's action client races under a multi-threaded executor (docs/ros.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node


def spin_node(make_node: Callable[[], Node], args: list[str] | None = None) -> None:
    """Build the node after ``rclpy.init`` and spin it until Ctrl-C or an external shutdown."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    rclpy.init(args=args)
    node = make_node()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
