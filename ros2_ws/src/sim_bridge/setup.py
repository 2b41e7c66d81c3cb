"""ament_python package sim_bridge: HomieBot simulator bridge."""

from setuptools import setup

PACKAGE = "sim_bridge"

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
    description="HomieBot simulator bridge: publishes the four RGB-D-segmentation views, camera info, odometry, joint states and /tf of a homiebot Simulator and serves the navigation and manipulation actions against it.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "sim_bridge = sim_bridge.node:main",
        ],
    },
)
