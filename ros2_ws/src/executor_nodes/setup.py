"""ament_python package executor_nodes: HomieBot low-level executors."""

from setuptools import setup

PACKAGE = "executor_nodes"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[PACKAGE],
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="HomieBot maintainers",
    maintainer_email="maintainers@homiebot.dev",
    description="HomieBot low-level executors: the subtask executor (EMMOE checks and retries, homiebot.executor.Executor) and the navigation and manipulation executors that forward skills to the simulator bridge.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "executor = executor_nodes.executor_node:main",
            "nav_executor = executor_nodes.nav_executor:nav_main",
            "manip_executor = executor_nodes.manip_executor:manip_main",
            "robot_interfaces = executor_nodes.robot_interfaces:main",
            "skill_policy = executor_nodes.policy_node:main",
        ],
    },
)
