"""ament_python package planner_node: HomieBot high-level planner node."""

from setuptools import setup

PACKAGE = "planner_node"

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
    description="HomieBot high-level planner node: turns the four views, the task and the executor's feedback into one subtask per round (thin wrapper around homiebot.agent.session.PlannerSession).",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "planner_node = planner_node.node:main",
        ],
    },
)
