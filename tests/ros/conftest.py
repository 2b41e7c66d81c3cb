"""Fixtures for the ROS 2 tests: an isolated DDS domain per test run, the graph as real processes, a listener.

Isolation: every test session picks a random ``ROS_DOMAIN_ID`` and keeps discovery on this machine
(``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``), so parallel runs (other checkouts, CI jobs on one host) do
not see each other's nodes.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ros_helpers import DISCOVERY_RANGE  # noqa: E402


@pytest.fixture(scope="session")
def ros_domain() -> Iterator[int]:
    """A random domain for this test session, exported so that rclpy contexts and child processes use it."""
    domain = random.Random(os.getpid() ^ time.time_ns()).randint(100, 220)
    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = DISCOVERY_RANGE
    yield domain
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
