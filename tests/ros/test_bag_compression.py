"""Bags are stored with zstd chunks and chunk CRCs, and stay readable by rosbags and by the mcap library.

No ROS install needed: the bag is written with rosbags' writer (what :func:`homiebot.ros.bag.record_bag` uses)
and then compressed by :func:`homiebot.ros.bag.compress_mcap`, as at the end of a recording.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mcap.exceptions import McapError
from mcap.reader import make_reader
from mcap.records import Chunk
from mcap.stream_reader import StreamReader
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from homiebot.ros.bag import BAG_VERSION, compress_mcap


def _write_bag(path: Path) -> list[tuple[str, int, bytes]]:
    store = get_typestore(Stores.ROS2_JAZZY)
    Image = store.types["sensor_msgs/msg/Image"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    String = store.types["std_msgs/msg/String"]
    written = []
    writer = Writer(path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    images = writer.add_connection("/camera/front/image_raw", Image.__msgtype__, typestore=store)
    status = writer.add_connection("/homie/status", String.__msgtype__, typestore=store)
    rng = np.random.default_rng(0)
    for i in range(40):
        # A rendered room is mostly flat colour: compressible like the real views.
        pixels = np.zeros((128, 128, 3), np.uint8)
        pixels[:, : 64 + i] = (200, 180, 150)
        pixels[rng.integers(0, 128, 20), rng.integers(0, 128, 20)] = 255
        msg = Image(header=Header(stamp=Time(sec=i, nanosec=0), frame_id="front"), height=128, width=128,
                    encoding="rgb8", is_bigendian=0, step=128 * 3, data=pixels.reshape(-1))
        data = bytes(store.serialize_cdr(msg, Image.__msgtype__))
        writer.write(images, 1_000_000_000 * (i + 1), data)
        written.append(("/camera/front/image_raw", 1_000_000_000 * (i + 1), data))
        text = bytes(store.serialize_cdr(String(data=f"round {i}"), String.__msgtype__))
        writer.write(status, 1_000_000_000 * (i + 1) + 1, text)
        written.append(("/homie/status", 1_000_000_000 * (i + 1) + 1, text))
    writer.close()
    return written


def test_compressed_bag_has_crcs_and_zstd_and_reads_back(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    written = _write_bag(bag)
    (storage,) = bag.glob("*.mcap")
    size_before = storage.stat().st_size
    with Reader(bag) as reader:
        qos_before = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}

    compress_mcap(storage)

    assert storage.stat().st_size < size_before / 3, (size_before, storage.stat().st_size)
    # The mcap library: every chunk zstd with a CRC, the CRCs verified while reading, every message there.
    with open(storage, "rb") as fh:
        chunks = [r for r in StreamReader(fh, emit_chunks=True, validate_crcs=True).records if isinstance(r, Chunk)]
    assert chunks and all(c.compression == "zstd" and c.uncompressed_crc != 0 for c in chunks)
    with open(storage, "rb") as fh:
        read = [(channel.topic, message.log_time, message.data) for _, channel, message in make_reader(fh).iter_messages()]
    assert read == written
    # rosbags (what homie bag info / play / replay use): same messages, topics, QoS and message counts.
    with Reader(bag) as reader:
        assert reader.message_count == len(written)
        assert {c.topic: c.ext.offered_qos_profiles for c in reader.connections} == qos_before
        again = [(connection.topic, timestamp, bytes(data)) for connection, timestamp, data in reader.messages()]
    assert again == written
    assert not list(tmp_path.rglob(".*"))  # no temporary file left behind


def test_a_truncated_storage_file_is_not_replaced(tmp_path: Path) -> None:
    # rosbags' chunks carry no CRC, so only damage to the structure can be found: a recording cut short.
    bag = tmp_path / "bag"
    _write_bag(bag)
    (storage,) = bag.glob("*.mcap")
    data = storage.read_bytes()[: storage.stat().st_size // 2]
    storage.write_bytes(data)
    with pytest.raises(McapError):
        compress_mcap(storage)
    assert storage.read_bytes() == data and not list(tmp_path.rglob(".*"))
