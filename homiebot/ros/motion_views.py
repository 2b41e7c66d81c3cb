"""The physical skills' reaching views through the graph (homiebot/sim/mujoco/motion_views.py): the sim bridge
publishes each moment as camera images, the planner node puts them back together for the episode's record.

Topics (the bridge publishes them in physical mode with its ``motion_views`` parameter on; ``homie up --images``
sets it), per camera ``<camera>`` in ``head`` and ``overview``:

* ``/reach_camera/<camera>/image_raw`` (sensor_msgs/Image, rgb8) and ``/reach_camera/<camera>/camera_info``
  (sensor_msgs/CameraInfo), image_transport's camera layout; the head frames are in the front head camera's optical
  frame (``front_camera_optical_frame``, on ``/tf_static``), the overview frames in
  ``overview_camera_optical_frame``, a free camera whose pose in ``map`` goes out on ``/tf`` with the same stamp;
* ``/reach_camera/moments`` (std_msgs/String, JSON ``{"stamp", "label", "cameras"}``): what had just happened at
  that moment ("gripper closed on short_can; hand at ..."), which no standard image message carries; its ``stamp``
  (simulated seconds) is the images' header stamp, which ties them together.

Reliable and volatile, 50 deep: a recorder and the planner node get every moment of an episode (a moment is a
few hundred kilobytes at most). Nothing here is a skill call; the robot's skill interfaces stay the standard actions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String

from homiebot.ros import convert
from homiebot.types import CameraView, MotionFrame

PREFIX = "/reach_camera"
MOMENTS_TOPIC = f"{PREFIX}/moments"
CAMERAS = ("head", "overview")
#: The optical frame of each camera's images (module docstring).
FRAMES = {"head": convert.optical_frame("front"), "overview": convert.optical_frame("overview")}
MOTION_QOS = QoSProfile(depth=50, history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.VOLATILE,
                        reliability=ReliabilityPolicy.RELIABLE)


def image_topic(camera: str) -> str:
    return f"{PREFIX}/{camera}/image_raw"


def info_topic(camera: str) -> str:
    return f"{PREFIX}/{camera}/camera_info"


def frame_id(camera: str) -> str:
    return FRAMES.get(camera, convert.optical_frame(camera))


def frame_to_msgs(frame: MotionFrame) -> tuple[String, dict[str, tuple[Image, CameraInfo]], list]:
    """A moment as the moment's String, each camera's Image and CameraInfo, and the ``/tf`` transforms of the
    cameras that move with the moment (the overview's, from ``map``)."""
    moment = String(data=json.dumps({"stamp": frame.stamp, "label": frame.label, "cameras": sorted(frame.views)}))
    images = {}
    transforms = []
    for camera, view in frame.views.items():
        optical = frame_id(camera)
        images[camera] = (convert.image_to_msg(view.rgb, "rgb8", optical, frame.stamp),
                          convert.camera_info_msg(view, optical, frame.stamp))
        if camera != "head":
            transforms.append(convert.transform_stamped(convert.matrix_to_pose(view.camera_to_world), convert.MAP_FRAME,
                                                        optical, frame.stamp))
    return moment, images, transforms


def _key(stamp) -> tuple[int, int]:
    return int(stamp.sec), int(stamp.nanosec)


@dataclass
class _Partial:
    label: str | None = None
    cameras: tuple[str, ...] = ()
    stamp: float = 0.0
    images: dict[str, np.ndarray] = field(default_factory=dict)
    infos: dict[str, CameraInfo] = field(default_factory=dict)

    def complete(self) -> bool:
        return self.label is not None and all(c in self.images and c in self.infos for c in self.cameras)


class MotionCollector:
    """The planner node's side: puts each moment's String, images and camera infos together (they arrive on
    separate topics, in any order) into :class:`~homiebot.types.MotionFrame` objects. Thread-safe: the
    subscriptions' callbacks fill it, the episode thread takes from it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[int, int], _Partial] = {}

    def subscribe(self, node) -> None:
        """Subscribe ``node`` to the moments and both cameras' images and infos."""
        node.create_subscription(String, MOMENTS_TOPIC, self.on_moment, MOTION_QOS)
        for camera in CAMERAS:
            node.create_subscription(Image, image_topic(camera), lambda msg, c=camera: self.on_image(c, msg), MOTION_QOS)
            node.create_subscription(CameraInfo, info_topic(camera), lambda msg, c=camera: self.on_info(c, msg),
                                     MOTION_QOS)

    def on_moment(self, msg: String) -> None:
        data = json.loads(msg.data)
        stamp = float(data["stamp"])
        key = _key(convert.header(stamp).stamp)
        with self._lock:
            partial = self._pending.setdefault(key, _Partial())
            partial.label, partial.cameras, partial.stamp = str(data["label"]), tuple(data["cameras"]), stamp

    def on_image(self, camera: str, msg: Image) -> None:
        image = np.array(convert.image_from_msg(msg))
        with self._lock:
            self._pending.setdefault(_key(msg.header.stamp), _Partial()).images[camera] = image

    def on_info(self, camera: str, msg: CameraInfo) -> None:
        with self._lock:
            self._pending.setdefault(_key(msg.header.stamp), _Partial()).infos[camera] = msg

    def take(self) -> list[MotionFrame]:
        """The moments received whole since the last call, oldest first."""
        with self._lock:
            done = sorted(k for k, p in self._pending.items() if p.complete())
            return [self._frame(self._pending.pop(k)) for k in done]

    def drain(self, timeout_s: float = 2.0) -> list[MotionFrame]:
        """At the episode's end: wait up to ``timeout_s`` for the moments still in flight, then every moment with its
        images (one whose label was lost keeps its images, unlabelled)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if all(p.complete() for p in self._pending.values()):
                    break
            time.sleep(0.02)
        frames = self.take()
        with self._lock:
            rest, self._pending = self._pending, {}
        frames += [self._frame(p) for _, p in sorted(rest.items()) if p.images and p.infos.keys() >= p.images.keys()]
        return sorted(frames, key=lambda f: f.stamp)

    def clear(self) -> None:
        with self._lock:
            self._pending = {}

    @staticmethod
    def _frame(partial: _Partial) -> MotionFrame:
        views = {}
        for camera, image in partial.images.items():
            info = partial.infos[camera]
            views[camera] = CameraView(name=camera, rgb=image, depth=np.zeros((0, 0), np.float32),
                                       segmentation=np.zeros((0, 0), np.int32), fx=float(info.k[0]),
                                       fy=float(info.k[4]), cx=float(info.k[2]), cy=float(info.k[5]),
                                       camera_to_world=np.eye(4))
        stamp = partial.stamp or (convert.time_seconds(next(iter(partial.infos.values())).header.stamp)
                                  if partial.infos else 0.0)
        return MotionFrame(stamp=stamp, label=partial.label or "", views=views)


def publish_frames(publishers: dict[str, tuple], moments_pub, tf_pub, frames: Sequence[MotionFrame]) -> None:
    """The bridge's side: each frame's images and infos first, then its moment (``publishers``: camera -> (image,
    info) publishers), and the moving cameras' transforms on ``tf_pub`` (None: no /tf)."""
    for frame in frames:
        moment, images, transforms = frame_to_msgs(frame)
        for camera, (image, info) in images.items():
            pubs = publishers.get(camera)
            if pubs is not None:
                pubs[0].publish(image)
                pubs[1].publish(info)
        if tf_pub is not None and transforms:
            from tf2_msgs.msg import TFMessage

            tf_pub.publish(TFMessage(transforms=transforms))
        moments_pub.publish(moment)
