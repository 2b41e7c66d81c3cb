"""Bring up the HomieBot graph on a machine with ROS 2 installed: ``ros2 launch homie sim.launch.py``.

Arguments:
  scene      scene library name for a free-text episode (default: the task's scene)
  task       built-in task id; empty: the planner waits for homie_msgs/Task on /homie/task
  planner    planner registry name (expert, scripted, random, openai, ...)
  simulator  simulator backend of the sim bridge (mujoco)
  seed       run index (the scene seed is the task's seed + this)
  noise      skill execution noise preset of the sim bridge: noiseless, emmoe_table4 (alias emmoe);
             empty: config/homie.yaml's (noiseless)
  rviz       true: also start rviz2 with rviz/homie.rviz

The processes and their order come from config/graph.yaml, the parameters from config/homie.yaml: the same
files `homie up sim` uses where launch is not installed (PyPI wheels), so both bring up the same graph.
``on-failure`` / ``always`` restart policies become ``respawn``; a required node that exits ends the launch.
"""

from __future__ import annotations

import os

import yaml
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

ARGUMENTS = {
    "scene": ("", "Scene library name (default: the task's scene)."),
    "task": ("", "Built-in task id; empty: wait for homie_msgs/Task on /homie/task."),
    "planner": ("expert", "Planner registry name."),
    "simulator": ("mujoco", "Simulator backend of the sim bridge."),
    "seed": ("0", "Run index: the scene seed is the task's seed + this."),
    "noise": ("", "Skill execution noise preset of the sim bridge (noiseless, emmoe_table4 or emmoe); empty: config/homie.yaml's."),
    "rviz": ("true", "Start rviz2 with the HomieBot layout."),
}


def _nodes(context, *_args, **_kwargs):
    share = get_package_share_directory("homie")
    params_file = os.path.join(share, "config", "homie.yaml")
    with open(os.path.join(share, "config", "graph.yaml")) as handle:
        graph = yaml.safe_load(handle)

    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    overrides = {
        "sim_bridge": {"simulator": arg("simulator")},
        "planner_node": {"planner": arg("planner"), "seed": int(arg("seed"))},
    }
    if arg("task"):
        overrides["planner_node"]["task"] = arg("task")
    if arg("scene"):
        overrides["planner_node"]["scene"] = arg("scene")
    if arg("noise"):
        overrides["sim_bridge"]["noise"] = arg("noise")

    actions = []
    for spec in graph["nodes"]:
        node = Node(
            package=spec["package"],
            executable=spec["executable"],
            name=spec["name"],
            parameters=[params_file, overrides.get(spec["name"], {})],
            respawn=spec.get("restart", "on-failure") in ("on-failure", "always"),
            respawn_delay=0.5,
            output="screen",
            emulate_tty=True,
            # Nodes off the planner's path (perception) yield the CPU to it, as `homie up` starts them.
            prefix=f"nice -n {spec['nice']}" if spec.get("nice") else None,
        )
        actions.append(node)
        if spec.get("required", False):
            actions.append(RegisterEventHandler(OnProcessExit(target_action=node, on_exit=[EmitEvent(event=Shutdown(reason=f"{spec['name']} exited"))])))
    return actions


def generate_launch_description() -> LaunchDescription:
    share = get_package_share_directory("homie")
    declared = [DeclareLaunchArgument(name, default_value=default, description=text) for name, (default, text) in ARGUMENTS.items()]
    rviz = Node(
        package="rviz2",
        executable="rviz2",
        name="rviz2",
        arguments=["-d", os.path.join(share, "rviz", "homie.rviz")],
        # The bridge stamps /tf, images and joints with the simulated time and publishes it on /clock.
        parameters=[{"use_sim_time": True}],
        condition=IfCondition(LaunchConfiguration("rviz")),
        output="log",
    )
    return LaunchDescription([*declared, OpaqueFunction(function=_nodes), rviz])
