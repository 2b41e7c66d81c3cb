"""The Fast DDS profile is chosen by the room in /dev/shm (homiebot.ros.environment.fastdds_profile).

No rclpy needed: this is plain file and statvfs logic, and the two profiles must stay valid XML that names
what the docs say they name.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from homiebot.ros import environment

NS = {"dds": "http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles"}


class _Stat:
    def __init__(self, free_bytes: int) -> None:
        self.f_frsize = 4096
        self.f_bavail = free_bytes // 4096


def test_shared_memory_profile_where_dev_shm_has_room(monkeypatch):
    monkeypatch.setattr(os, "statvfs", lambda _path: _Stat(8 * 2**30))
    assert environment.fastdds_profile().name == "fastdds.xml"


def test_udp_profile_where_dev_shm_is_small(monkeypatch):
    monkeypatch.setattr(os, "statvfs", lambda _path: _Stat(64 * 2**20))  # a container's default /dev/shm
    assert environment.fastdds_profile().name == "fastdds_udp.xml"


def test_udp_profile_where_dev_shm_is_missing(tmp_path):
    assert environment.fastdds_profile(tmp_path / "absent").name == "fastdds_udp.xml"


def test_profiles_parse_and_keep_the_heartbeat():
    shared = ET.parse(environment.repository_root() / "launch/config/fastdds.xml")
    udp = ET.parse(environment.repository_root() / "launch/config/fastdds_udp.xml")
    for tree in (shared, udp):
        period = tree.find(".//dds:data_writer/dds:times/dds:heartbeatPeriod/dds:nanosec", NS)
        assert period is not None and int(period.text) == 100_000_000
    segment = shared.find(".//dds:transport_descriptor[dds:type='SHM']/dds:segment_size", NS)
    assert int(segment.text) >= 4 * 2**20  # holds a four-view MultiView with depth and segmentation (2.9 MB)
    assert shared.find(".//dds:participant/dds:rtps/dds:useBuiltinTransports", NS).text == "false"
    assert udp.find(".//dds:transport_descriptor", NS) is None  # Fast DDS's default transports

