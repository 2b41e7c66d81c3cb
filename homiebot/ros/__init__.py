"""The ROS 2 layer of HomieBot: only what needs ROS types or processes (the algorithms are in the core).

* :mod:`.environment` - the environment that makes rclpy and the colcon overlay importable (no rclpy needed)
* :mod:`.convert` - core types <-> ``homie_msgs`` and standard messages
* :mod:`.calls` - blocking service / action calls with deadlines, QoS profiles
* :mod:`.remote` - Simulator-protocol proxy and grounder over the graph (the executor node's world)
* :mod:`.episode` - the planner node's episode loop (the core loop's order, over a backend)
* :mod:`.supervisor` - ``homie up``: start, supervise, restart and stop the node processes
* :mod:`.bag` - rosbag2 MCAP record / play / info with ``rosbags``; :mod:`.replay` - offline planner regression

See ``docs/ros.md``.
"""
