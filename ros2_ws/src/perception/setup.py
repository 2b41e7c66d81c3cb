"""ament_python package homie_perception: HomieBot perception node."""

from setuptools import setup

PACKAGE = "homie_perception"

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
    description="HomieBot perception node: publishes the 3D world graph (homie_msgs/WorldGraph and visualization_msgs/MarkerArray) and serves target grounding (ResolveTarget).",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "perception = homie_perception.node:main",
        ],
    },
)
