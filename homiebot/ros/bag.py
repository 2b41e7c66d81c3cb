"""rosbag2 (MCAP) recording, playback and inspection for the HomieBot graph, without the rosbag2 C++ stack.

``rosbag2`` is not on PyPI; ``rosbags`` writes and reads the same format. Recording uses rclpy *raw*
subscriptions (the serialized CDR bytes, never deserialized), playback raw publishers, so the bag holds
exactly what was on the wire and ``ros2 bag`` on a real install reads it.

* :func:`record_bag` discovers topics (all, or a selection) as they appear, subscribes with a QoS that
  matches the publishers (transient-local for latched topics, so late joiners still get them) and writes
  ``(topic, receive time, bytes)`` to a temporary bag that is moved into place only when it is closed: an
  interrupted recording leaves a complete bag or none, never half of one. Hidden topics (action internals) are
  left out, as ``ros2 bag record`` leaves them out, except each action's goal status
  (``<action>/_action/status``, action_msgs/GoalStatusArray): which goals every action server took and how they
  ended, the trace of which interfaces an episode used (:func:`action_goals`). Goals and results themselves are
  service calls, which a bag of topics does not hold.
* :func:`play_bag` publishes the messages again with their recorded spacing (scaled by ``rate``) or as
  fast as possible (``rate=None``), and waits until reliable subscribers acknowledged them.
* :func:`bag_info` reads only the files (no ROS 2 needed): topics, types, counts, rates, duration and, for
  a bag of an episode, its task and final status (decoded with the ``rosbags`` type system from the
  ``homie_msgs`` definitions in ``msgs/``).

Metadata version 8 is written: every rosbag2 from Humble on reads it.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from homiebot.files import publish
from homiebot.ros.environment import repository_root

log = logging.getLogger(__name__)

BAG_VERSION: Literal[8] = 8
#: The one hidden topic of an action that is recorded (module docstring).
ACTION_STATUS_SUFFIX = "/_action/status"
#: The topics that make a bag an episode record (what `bag replay` and `bag info` read).
EPISODE_TOPICS = (
    "/homie/task_started",
    "/homie/planner_output",
    "/homie/episode_status",
    "/homie/views",
    "/sim/world_state",
    "/sim/scene_description",
)
#: The graph's own topics with their types and whether they are latched (transient local): a recorder
#: subscribes to these before any node runs, so that a bag of an episode misses nothing from its start.
GRAPH_TOPICS: dict[str, tuple[str, bool]] = {
    "/homie/task": ("homie_msgs/msg/Task", True),
    "/homie/task_started": ("homie_msgs/msg/Task", True),
    "/homie/planner_output": ("homie_msgs/msg/PlannerOutput", True),
    "/homie/episode_status": ("homie_msgs/msg/EpisodeStatus", True),
    "/homie/views": ("homie_msgs/msg/MultiView", True),
    "/sim/world_state": ("homie_msgs/msg/WorldState", True),
    "/sim/scene_description": ("std_msgs/msg/String", True),
    "/sim/path": ("nav_msgs/msg/Path", True),
    "/odom": ("nav_msgs/msg/Odometry", False),
    "/joint_states": ("sensor_msgs/msg/JointState", False),
    "/clock": ("rosgraph_msgs/msg/Clock", True),
    "/tf": ("tf2_msgs/msg/TFMessage", False),
    "/tf_static": ("tf2_msgs/msg/TFMessage", True),
    "/perception/world_graph": ("homie_msgs/msg/WorldGraph", True),
    "/perception/markers": ("visualization_msgs/msg/MarkerArray", True),
    # The physical skills' reaching views (homiebot.ros.motion_views), when the bridge publishes them.
    "/reach_camera/moments": ("std_msgs/msg/String", False),
    "/reach_camera/head/image_raw": ("sensor_msgs/msg/Image", False),
    "/reach_camera/head/camera_info": ("sensor_msgs/msg/CameraInfo", False),
    "/reach_camera/overview/image_raw": ("sensor_msgs/msg/Image", False),
    "/reach_camera/overview/camera_info": ("sensor_msgs/msg/CameraInfo", False),
}
EPISODE_STATES = {0: "WAITING", 1: "RUNNING", 2: "ENDED", 3: "ROUND_LIMIT", 4: "TIMEOUT", 5: "FAILED"}
FINAL_STATES = {2, 3, 4, 5}


class BagError(RuntimeError):
    """A bag could not be written or read; ``exit_code`` is 2 for bad input (missing / corrupt), 1 otherwise."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# ------------------------------------------------------------------------------------------------ type system


def _message_dirs(package: str) -> list[Path]:
    """Where ``<package>/msg/*.msg`` may be: every prefix on AMENT_PREFIX_PATH, then this repository's msgs/."""
    dirs = [Path(p) / "share" / package / "msg" for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if package == "homie_msgs":
        dirs.append(repository_root() / "msgs" / "msg")
    return [d for d in dirs if d.is_dir()]


def register_package(store, package: str) -> bool:
    """Add every ``.msg`` of ``package`` found on the ament path (or in msgs/) to a rosbags typestore."""
    for directory in _message_dirs(package):
        types: dict = {}
        for path in sorted(directory.glob("*.msg")):
            types.update(get_types_from_msg(path.read_text(), f"{package}/msg/{path.stem}"))
        store.register(types)
        return True
    return False


def typestore_for(msgtypes: Iterable[str] = ()):
    """A Jazzy typestore plus homie_msgs and the packages of ``msgtypes`` that it does not know."""
    store = get_typestore(Stores.ROS2_JAZZY)
    register_package(store, "homie_msgs")
    for msgtype in msgtypes:
        if msgtype not in store.fielddefs:
            register_package(store, msgtype.split("/")[0])
    return store


# ------------------------------------------------------------------------------------------------ QoS


def _rosbags_qos(reliable: bool, transient_local: bool, depth: int) -> Qos:
    zero = QosTime(sec=0, nsec=0)
    return Qos(
        history=QosHistory.KEEP_LAST,
        depth=depth,
        reliability=QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
        durability=QosDurability.TRANSIENT_LOCAL if transient_local else QosDurability.VOLATILE,
        deadline=zero,
        lifespan=zero,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=zero,
        avoid_ros_namespace_conventions=False,
    )


def _message_class(msgtype: str):
    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


# ------------------------------------------------------------------------------------------------ record


@dataclass
class RecordSummary:
    path: Path
    messages: int
    topics: dict[str, int]
    duration_s: float


def record_bag(
    output: str | os.PathLike[str],
    *,
    topics: Sequence[str] | None = None,
    duration_s: float | None = None,
    until_episode_end: bool = False,
    overwrite: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    exclude_camera_topics: bool = False,
    max_messages: int | None = None,
    discovery_interval_s: float = 0.25,
    graph_topics: bool = True,
    ready: Callable[[], None] | None = None,
) -> RecordSummary:
    """Record until ``duration_s``, the episode's end, ``max_messages``, or ``should_stop()`` (see the module doc).

    ``graph_topics``: subscribe to the graph's own topics (:data:`GRAPH_TOPICS`) at once, before their
    publishers exist, so that nothing published from the start of an episode is missed; other topics are
    picked up as they are discovered. ``ready`` is called once those subscriptions exist (``homie up
    --record`` starts the nodes only then)."""
    import rclpy
    import rclpy.executors
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message

    output = Path(output)
    if output.exists() and not overwrite:
        raise BagError(f"{output} exists; choose another path or pass --overwrite")
    output.parent.mkdir(parents=True, exist_ok=True)
    # The bag is written under a hidden sibling folder and moved into place when complete. rosbags names
    # the storage file after the bag folder, so the bag folder inside keeps the final name.
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    publish(staging)
    tmp = staging / output.name
    wanted = set(topics) if topics else None
    writer = Writer(tmp, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    store = typestore_for()
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("homie_bag_recorder", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    connections: dict[str, Any] = {}
    counts: dict[str, int] = {}
    state: dict[str, Any] = {"ended_at": None, "total": 0}
    status_class = None

    def subscribe(topic: str, msgtype: str, latched: bool | None = None) -> None:
        nonlocal status_class
        try:
            msg_class = _message_class(msgtype)
        except (ImportError, AttributeError, ValueError):
            log.warning("not recording %s: type %s is not importable here", topic, msgtype)
            connections[topic] = None
            return
        if msgtype not in store.fielddefs:
            register_package(store, msgtype.split("/", maxsplit=1)[0])  # a package found on the ament path
        if latched is None:  # adapt to the publishers, as rosbag2 does
            infos = node.get_publishers_info_by_topic(topic)
            transient = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
            reliable = not any(i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for i in infos)
        else:  # one of the graph's own topics, subscribed before its publisher exists
            transient, reliable = latched, True
        depth = 100
        qos = QoSProfile(
            depth=depth,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if transient else DurabilityPolicy.VOLATILE,
        )
        try:
            connection = writer.add_connection(
                topic, msgtype, typestore=store, offered_qos_profiles=[_rosbags_qos(reliable, transient, depth)]
            )
        except Exception as err:  # a type whose definition we cannot find: skip the topic, say so
            log.warning("not recording %s (%s): %s", topic, msgtype, err)
            connections[topic] = None
            return
        connections[topic] = connection
        counts[topic] = 0
        if topic == "/homie/episode_status":
            status_class = msg_class

        def on_message(data: bytes, topic: str = topic, connection: Any = connection) -> None:
            writer.write(connection, time.time_ns(), data)
            counts[topic] += 1
            state["total"] += 1
            if until_episode_end and topic == "/homie/episode_status" and state["ended_at"] is None:
                status = deserialize_message(data, status_class)
                if status.state in FINAL_STATES:
                    state["ended_at"] = time.monotonic()

        node.create_subscription(msg_class, topic, on_message, qos, raw=True)
        log.info("recording %s (%s%s)", topic, msgtype, ", latched" if transient else "")

    def discover() -> None:
        for topic, types in node.get_topic_names_and_types():
            if topic in connections or not types:
                continue
            if wanted is not None and topic not in wanted:
                continue
            if exclude_camera_topics and topic.startswith("/camera/"):
                continue
            if topic.endswith(ACTION_STATUS_SUFFIX):
                pass  # an action's goal status: which goals it took (module docstring)
            elif "/_action/" in topic or topic.rsplit("/", 1)[-1].startswith("_"):
                continue  # hidden topics (action internals), as ros2 bag record leaves them out
            subscribe(topic, types[0])

    started = time.monotonic()
    next_discovery = 0.0
    try:
        if graph_topics:
            for topic, (msgtype, latched) in GRAPH_TOPICS.items():
                if wanted is None or topic in wanted:
                    subscribe(topic, msgtype, latched)
        discover()
        if ready is not None:
            ready()
        while not should_stop():
            now = time.monotonic()
            if now >= next_discovery:
                discover()
                next_discovery = now + discovery_interval_s
            executor.spin_once(timeout_sec=0.05)
            if duration_s is not None and now - started >= duration_s:
                break
            if max_messages is not None and state["total"] >= max_messages:
                break
            # Keep listening briefly after the end so that the last outputs and states are in the bag too.
            if state["ended_at"] is not None and now - state["ended_at"] > 0.5:
                break
    except Exception as err:
        writer.close()
        shutil.rmtree(staging, ignore_errors=True)
        raise BagError(f"recording failed: {err}", exit_code=1) from err
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    writer.close()
    try:
        for storage_file in tmp.glob("*.mcap"):
            compress_mcap(storage_file)
    except Exception as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise BagError(f"recording failed while compressing the bag: {err}", exit_code=1) from err
    if output.exists():
        shutil.rmtree(output) if output.is_dir() else output.unlink()
    os.replace(tmp, output)
    staging.rmdir()
    return RecordSummary(output, state["total"], {t: c for t, c in counts.items()}, time.monotonic() - started)


def compress_mcap(path: Path, chunk_size: int = 4 * 2**20) -> None:
    """Rewrite an MCAP file with zstd-compressed chunks and a CRC-32 per chunk, in place (atomically).

    rosbags' writer stores chunks uncompressed with a CRC of 0 ("not computed", MCAP specification, Chunk
    record). The official ``mcap`` library's writer re-chunks the same records (schemas, channels with their
    QoS metadata, messages with their log and publish times, metadata such as rosbag2's, attachments) with
    compression and CRCs, and rebuilds the summary and indexes. rosbags, ``mcap`` and ros2 bag read the result
    (zstd is MCAP's standard chunk compression). Done after recording so that compressing never delays a
    subscription callback.
    """
    from mcap.records import Attachment, Channel, Header, Message, Metadata, Schema
    from mcap.stream_reader import StreamReader
    from mcap.writer import CompressionType
    from mcap.writer import Writer as McapFileWriter

    target = path.with_name(f".{path.name}.zstd")
    schemas: dict[int, int] = {0: 0}  # schema id 0: a channel without a schema
    channels: dict[int, int] = {}
    try:
        with open(path, "rb") as source, open(target, "wb") as sink:
            writer = McapFileWriter(sink, chunk_size=chunk_size, compression=CompressionType.ZSTD, enable_crcs=True)
            for record in StreamReader(source, validate_crcs=True).records:
                if isinstance(record, Header):
                    writer.start(profile=record.profile, library=f"{record.library}; zstd chunks by the mcap library")
                # The summary section repeats schemas and channels under the same ids: keep the first.
                elif isinstance(record, Schema) and record.id not in schemas:
                    schemas[record.id] = writer.register_schema(record.name, record.encoding, record.data)
                elif isinstance(record, Channel) and record.id not in channels:
                    channels[record.id] = writer.register_channel(
                        record.topic, record.message_encoding, schemas[record.schema_id], record.metadata
                    )
                elif isinstance(record, Message):
                    writer.add_message(channels[record.channel_id], record.log_time, record.data,
                                       record.publish_time, record.sequence)
                elif isinstance(record, Metadata):
                    writer.add_metadata(record.name, record.metadata)
                elif isinstance(record, Attachment):
                    writer.add_attachment(record.create_time, record.log_time, record.name, record.media_type,
                                          record.data)
            writer.finish()
        os.replace(target, path)
    finally:
        target.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------------ read


def _open_reader(path: str | os.PathLike[str]) -> Reader:
    path = Path(path)
    if not path.exists():
        raise BagError(f"no bag at {path}")
    try:
        reader = Reader(path)
        reader.open()
    except Exception as err:  # rosbags raises several types for damaged files; all mean "not a readable bag"
        raise BagError(f"{path} is not a readable rosbag2 bag: {err}") from None
    return reader


@dataclass
class TopicInfo:
    name: str
    msgtype: str
    count: int
    frequency_hz: float | None


@dataclass
class BagInfo:
    path: Path
    storage: str
    start_ns: int
    end_ns: int
    messages: int
    topics: list[TopicInfo]
    episode: dict[str, Any] | None = None

    @property
    def duration_s(self) -> float:
        return max(self.end_ns - self.start_ns, 0) / 1e9

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["duration_s"] = self.duration_s
        return data


def bag_info(path: str | os.PathLike[str]) -> BagInfo:
    """Read a bag's metadata and summary; a missing, empty or damaged bag raises :class:`BagError`."""
    reader = _open_reader(path)
    try:
        duration = max(reader.duration, 0) / 1e9 if reader.message_count else 0.0
        topics = []
        for name, topic in sorted(reader.topics.items()):
            count = topic.msgcount
            topics.append(TopicInfo(name, topic.msgtype or "", count, (count - 1) / duration if duration > 0 and count > 1 else None))
        storage = "mcap" if any(str(p).endswith(".mcap") for p in getattr(reader, "paths", [])) or Path(path).suffix == ".mcap" else "rosbag2"
        info = BagInfo(Path(path), storage, reader.start_time if reader.message_count else 0,
                       reader.end_time if reader.message_count else 0, reader.message_count, topics)
        try:
            info.episode = _episode_summary(reader)
        except Exception as err:  # the bag is fine; only its episode topics could not be decoded
            log.warning("episode summary unavailable: %s", err)
    except BagError:
        raise
    except Exception as err:
        raise BagError(f"{path} is not a readable rosbag2 bag: {err}") from None
    finally:
        reader.close()
    return info


#: The human's planner outputs in a bag of a two-agent episode (its namespace, homiebot.ros.convert.ROLE_NAMESPACES).
PARTNER_OUTPUT_TOPIC = "/human/homie/planner_output"


def _episode_summary(reader: Reader) -> dict[str, Any] | None:
    wanted = [c for c in reader.connections if c.topic in ("/homie/task_started", "/homie/episode_status",
                                                           "/homie/planner_output", PARTNER_OUTPUT_TOPIC)]
    if not wanted:
        return None
    store = typestore_for()
    summary: dict[str, Any] = {}
    rounds = partner_rounds = 0
    for connection, _timestamp, data in reader.messages(connections=wanted):
        if connection.topic == PARTNER_OUTPUT_TOPIC:  # counted, not decoded
            partner_rounds += 1
            continue
        msg = store.deserialize_cdr(data, connection.msgtype)
        if connection.topic == "/homie/task_started":
            summary.update(task_id=msg.task_id, instruction=msg.instruction, scene=msg.scene, seed=msg.seed)
        elif connection.topic == "/homie/planner_output":
            rounds += 1
        else:
            summary.update(
                state=EPISODE_STATES.get(msg.state, str(msg.state)),
                rounds=msg.round_index,
                last_subtask=msg.last_subtask,
                goal={-1: None, 0: False, 1: True}.get(msg.goal),
                error=msg.error or None,
            )
    summary["planner_outputs"] = rounds
    if partner_rounds:  # a two-agent episode (docs/ros.md, "Two agents"): the human's rounds
        summary["partner_planner_outputs"] = partner_rounds
    return summary


@dataclass
class BagMessage:
    topic: str
    msgtype: str
    timestamp_ns: int
    data: bytes


def read_messages(path: str | os.PathLike[str], topics: Iterable[str] | None = None) -> list[BagMessage]:
    """All (selected) messages of a bag, raw, in time order."""
    reader = _open_reader(path)
    selected = set(topics) if topics is not None else None
    try:
        connections = [c for c in reader.connections if selected is None or c.topic in selected]
        return [BagMessage(c.topic, c.msgtype, t, bytes(d)) for c, t, d in reader.messages(connections=connections)]
    except Exception as err:
        raise BagError(f"{path}: damaged bag ({err})") from None
    finally:
        reader.close()


def action_goals(path: str | os.PathLike[str]) -> dict[str, set[bytes]]:
    """Per action whose status a bag holds (``/navigate_to_pose``, ``/sim/manipulate``, ...), the ids of the goals
    its server took (each id once, whatever statuses it went through)."""
    store = get_typestore(Stores.ROS2_JAZZY)
    goals: dict[str, set[bytes]] = {}
    for message in read_messages(path):
        if not message.topic.endswith(ACTION_STATUS_SUFFIX):
            continue
        status: Any = store.deserialize_cdr(message.data, message.msgtype)  # action_msgs/msg/GoalStatusArray
        ids = goals.setdefault(message.topic.removesuffix(ACTION_STATUS_SUFFIX), set())
        ids.update(bytes(s.goal_info.goal_id.uuid) for s in status.status_list)
    return goals


# ------------------------------------------------------------------------------------------------ play


@dataclass
class PlaySummary:
    messages: int
    topics: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0


def play_bag(
    path: str | os.PathLike[str],
    *,
    rate: float | None = 1.0,
    topics: Sequence[str] | None = None,
    wait_s: float = 1.0,
    should_stop: Callable[[], bool] = lambda: False,
    ack_timeout_s: float = 5.0,
) -> PlaySummary:
    """Publish a bag's messages raw; ``rate=None`` publishes as fast as possible (see the module docstring)."""
    import rclpy
    import rclpy.executors
    from rclpy.duration import Duration
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    if rate is not None and rate <= 0:
        raise BagError(f"rate must be positive, got {rate}")
    reader = _open_reader(path)
    selected = set(topics) if topics else None
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("homie_bag_player", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    publishers: dict[str, Any] = {}
    summary = PlaySummary(0)
    started = time.monotonic()
    try:
        connections = [c for c in reader.connections if selected is None or c.topic in selected]
        if selected is not None and not connections:
            raise BagError(f"none of the topics {sorted(selected)} is in the bag")
        for connection in connections:
            if connection.topic in publishers:
                continue
            try:
                msg_class = _message_class(connection.msgtype)
            except (ImportError, AttributeError, ValueError):
                log.warning("not playing %s: type %s is not importable here", connection.topic, connection.msgtype)
                publishers[connection.topic] = None
                continue
            offered = list(getattr(connection.ext, "offered_qos_profiles", []) or [])
            transient = any(q.durability == QosDurability.TRANSIENT_LOCAL for q in offered)
            best_effort = any(q.reliability == QosReliability.BEST_EFFORT for q in offered)
            qos = QoSProfile(
                depth=1000,  # as fast as possible must not overrun a reliable subscriber's history
                reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL if transient else DurabilityPolicy.VOLATILE,
            )
            publishers[connection.topic] = node.create_publisher(msg_class, connection.topic, qos)
        # Discovery: wait until every publisher has a subscriber, at most ``wait_s`` (nobody may be listening).
        # A message published before a subscriber matched is lost to it, and a loaded machine can take seconds.
        deadline = time.monotonic() + wait_s
        live = [p for p in publishers.values() if p is not None]
        while time.monotonic() < deadline and not should_stop():
            if live and all(p.get_subscription_count() > 0 for p in live):
                break
            executor.spin_once(timeout_sec=0.05)
        first_ns: int | None = None
        wall_start = time.monotonic()
        for connection, timestamp, data in reader.messages(connections=connections):
            if should_stop():
                break
            publisher = publishers.get(connection.topic)
            if publisher is None:
                continue
            if first_ns is None:
                first_ns = timestamp
            if rate is not None:
                delay = (timestamp - first_ns) / 1e9 / rate - (time.monotonic() - wall_start)
                if delay > 0:
                    time.sleep(delay)
            publisher.publish(bytes(data))
            summary.messages += 1
            summary.topics[connection.topic] = summary.topics.get(connection.topic, 0) + 1
        for publisher in publishers.values():
            if publisher is not None:
                publisher.wait_for_all_acked(Duration(seconds=ack_timeout_s))
    except BagError:
        raise
    except Exception as err:
        raise BagError(f"{path}: playback failed ({err})", exit_code=1) from err
    finally:
        reader.close()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    summary.duration_s = time.monotonic() - started
    return summary
