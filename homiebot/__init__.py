"""HomieBot: hierarchical VLM planner + error-reporting low-level executors for household mobile manipulation.

The package is ROS-agnostic; ROS 2 nodes in ``ros2_ws/src`` wrap it. See ``docs/architecture.md``.
"""

__version__ = "0.1.0"
