"""Fixtures for the ROS 2 tests: an isolated DDS domain per test module.

Isolation: every test module picks a random ``ROS_DOMAIN_ID`` and keeps discovery on this machine
(``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``), so parallel runs (other checkouts, CI jobs on one host) do
not see each other's nodes.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator

import pytest

from homiebot.testing.ros_helpers import DISCOVERY_RANGE

_DOMAINS = iter(random.Random(os.getpid() ^ time.time_ns()).sample(range(100, 221), 121))


@pytest.fixture(scope="module")
def ros_domain() -> Iterator[int]:
    """A fresh random domain for each test module, exported so that rclpy contexts and child processes use it.
    Fresh per module: a node killed on purpose (the timeout test) stays in its peers' discovery data until its
    lease runs out, and must not meet the next module's graph."""
    domain = next(_DOMAINS)
    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = DISCOVERY_RANGE
    yield domain
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
