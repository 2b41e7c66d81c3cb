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
