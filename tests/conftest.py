"""Shared pytest configuration: tier markers that skip with a reason when their tier cannot run here."""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _gpu_reason() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (the 'models' extra)"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU on this machine (GPU figures come from the device machine; see BENCHMARKS.md)"
    return None


def _ros_reason() -> str | None:
    if importlib.util.find_spec("rclpy") is None:
        return "rclpy is not importable: run scripts/setup_ros.sh and source scripts/ros_env.sh"
    if importlib.util.find_spec("homie_msgs") is None:
        return "homie_msgs is not built: run scripts/setup_ros.sh and source scripts/ros_env.sh"
    return None


def _models_reason() -> str | None:
    for mod in ("torch", "transformers"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (the 'models' extra: pip install -e '.[models]')"
    return None


#: The first launch_testing release whose pytest plugin pytest 9 can load (its hooks take ``module_path``;
#: older ones declare the ``path`` argument pytest 9 removed: ros2/launch#979).
LAUNCH_TESTING_MIN = (3, 4, 12)
#: launch_testing's pytest plugin module, and the name this conftest registers it under.
LAUNCH_TESTING_HOOKS = "launch_testing.pytest.hooks"
LAUNCH_TESTING_PLUGIN = "homie_launch_testing"


def launch_testing_problem() -> str | None:
    """Why the launch_testing tier cannot run here, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("launch_testing")
    except PackageNotFoundError:
        if importlib.util.find_spec("launch_testing") is None:
            return "launch_testing is not installed (not on PyPI: a system ROS 2 install brings it)"
        found = "0"  # installed without distribution metadata: its version is unknown, so taken as too old
    parts = tuple(int(p) for p in found.split(".")[:3] if p.isdigit())
    if parts and parts < LAUNCH_TESTING_MIN and int(pytest.__version__.split(".")[0]) >= 9:
        return (f"launch_testing {found} cannot be loaded by pytest {pytest.__version__} (ros2/launch#979); "
                f"it needs launch_testing >= {'.'.join(map(str, LAUNCH_TESTING_MIN))} or pytest < 9")
    return None


def pytest_configure(config: pytest.Config) -> None:
    # The launch tier's marker exists even where its plugin is not loaded (--strict-markers).
    config.addinivalue_line("markers", "launch_test: a launch_testing test module (needs launch_testing)")
    problem = launch_testing_problem()
    if problem is None:
        register_launch_testing(config.pluginmanager)
    os.environ["HOMIE_LAUNCH_TESTING_PROBLEM"] = problem or ""


def register_launch_testing(manager: pytest.PytestPluginManager) -> None:
    """Register launch_testing's pytest plugin unless it is already there. Auto-loading is off (pyproject addopts:
    -p no:launch_testing), but a user may load the module by hand (``pytest -p launch_testing.pytest.hooks``): pluggy
    refuses one module under two names ("Plugin already registered under a different name"), so the module
    itself is looked for, under any name, not only this conftest's own."""
    import importlib

    hooks = importlib.import_module(LAUNCH_TESTING_HOOKS)
    if manager.is_registered(hooks) or manager.has_plugin(LAUNCH_TESTING_HOOKS) or manager.has_plugin(LAUNCH_TESTING_PLUGIN):
        return
    manager.register(hooks, LAUNCH_TESTING_PLUGIN)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reasons = {"gpu": _gpu_reason, "ros": _ros_reason, "models": _models_reason}
    cache: dict[str, str | None] = {}
    for item in items:
        for marker, probe in reasons.items():
            # get_closest_marker, not `in item.keywords`: keywords also hold folder names (tests/ros/...).
            if item.get_closest_marker(marker) is not None:
                if marker not in cache:
                    cache[marker] = probe()
                if cache[marker]:
                    item.add_marker(pytest.mark.skip(reason=cache[marker]))
