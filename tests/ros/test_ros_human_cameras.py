"""PARTNR's human's cameras on the wire, as the robot's: the sim bridge with ``human:=true`` publishes per view
``/human/camera/<view>/{image_raw, camera_info, depth/image_raw, depth/camera_info, segmentation/image_raw}`` in the
human's own frames (``human/<view>_camera_optical_frame``), latches the human's camera mounts on ``/tf_static``
beside the robot's (one message holds both), and sends ``odom -> human/base_link`` on ``/tf``; chained, they put
each human camera where its view says it was. The robot's topics and frames stay as they were.

The bridge runs in this process over a real simulator with the human; a listener node subscribes over DDS (the
bridge publishes the per-camera topics only to subscribers) and the bridge's render handlers are called
directly, as tests/ros/test_ros_human_bridge.py does."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

VIEWS = ("front", "left", "back", "right")
KINDS = ("image_raw", "depth/image_raw", "segmentation/image_raw", "camera_info", "depth/camera_info")


@pytest.fixture
def wired(ros_domain):
    """A bridge with the human and camera topics on, a listener of both agents' camera topics and of /tf and
    /tf_static, one executor spinning both."""
    import rclpy
    import rclpy.executors
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CameraInfo, Image
    from tf2_msgs.msg import TFMessage

    from homiebot.ros.calls import SENSOR_QOS
    from homiebot.sim.base import make_simulator

    rclpy.init(args=["--ros-args", "-p", "human:=true", "-p", "prerender:=false"])
    from sim_bridge.node import SimBridge

    sim = make_simulator("mujoco", render=True, width=64, height=48, human=True)
    bridge = SimBridge(simulator=sim)
    listener = rclpy.create_node("camera_listener")
    received: dict[str, list] = {}

    def listen(topic: str, msgtype, qos) -> None:
        received[topic] = []
        listener.create_subscription(msgtype, topic, received[topic].append, qos)

    for namespace in ("", "/human"):
        for view in VIEWS:
            for kind in KINDS:
                listen(f"{namespace}/camera/{view}/{kind}", CameraInfo if kind.endswith("camera_info") else Image, SENSOR_QOS)
    listen("/tf", TFMessage, SENSOR_QOS)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    listen("/tf_static", TFMessage, latched)
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(bridge)
    executor.add_node(listener)

    def spin(until, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)

    # The bridge publishes camera topics and /tf only to subscribers: wait until every one has matched.
    publishers = [p for pubs in (*bridge._camera_pubs.values(), *bridge._human_camera_pubs.values()) for p in pubs]
    spin(lambda: all(p.get_subscription_count() > 0 for p in publishers) and bridge._tf_pub.get_subscription_count() > 0)
    assert all(p.get_subscription_count() > 0 for p in publishers), "the listener did not match the camera topics"
    yield bridge, sim, received, spin
    executor.shutdown()
    listener.destroy_node()
    bridge.destroy_node()
    rclpy.try_shutdown()


def _render(bridge, handler):
    from homie_msgs.srv import RenderViews

    return handler(RenderViews.Request(include_depth=True, include_segmentation=True), RenderViews.Response()).views


def test_the_humans_cameras_have_their_own_topics_and_frames(wired):
    from homie_msgs.action import Navigate
    from homie_msgs.srv import ResetEpisode

    from homiebot.ros import convert

    bridge, sim, received, spin = wired
    assert bridge._on_reset(ResetEpisode.Request(scene="apartment_1", seed=0), ResetEpisode.Response()).success

    class Handle:
        request = Navigate.Goal(target="tv_stand", model="NoMaD", reset_arm_first=True)

        def publish_feedback(self, feedback) -> None:
            pass

        def succeed(self) -> None:
            pass

    bridge._on_navigate(Handle(), 1)  # the human walks: its base and cameras are away from the robot's
    robot_views = _render(bridge, bridge._on_render)
    human_views = _render(bridge, bridge._on_human_render)
    spin(lambda: all(received[f"{ns}/camera/{v}/{k}"] for ns in ("", "/human") for v in VIEWS for k in KINDS)
         and len(received["/tf_static"]) > 0 and any(t.child_frame_id == "human/base_link"
                                                    for m in received["/tf_static"] + received["/tf"] for t in m.transforms))
    expected = sim.agent(1).observe()  # the human's own four cameras, rendered by the simulator now
    for view in human_views.views:
        topic = f"/human/camera/{view.name}"
        frame = f"human/{convert.optical_frame(view.name)}"
        rgb, depth, segmentation = (received[f"{topic}/{k}"][-1] for k in KINDS[:3])
        info, depth_info = received[f"{topic}/camera_info"][-1], received[f"{topic}/depth/camera_info"][-1]
        assert (rgb.encoding, depth.encoding, segmentation.encoding) == ("rgb8", "32FC1", "32SC1")
        assert {m.header.frame_id for m in (rgb, depth, segmentation, info, depth_info)} == {frame}
        assert view.rgb.header.frame_id == frame  # the human's MultiView (the planner's answer) says the same
        np.testing.assert_array_equal(convert.image_from_msg(rgb), expected.views[view.name].rgb)
        np.testing.assert_array_equal(convert.image_from_msg(segmentation), expected.views[view.name].segmentation)
        camera = expected.views[view.name]
        assert (info.k[0], info.k[4], info.k[2], info.k[5]) == pytest.approx((camera.fx, camera.fy, camera.cx, camera.cy))
        assert list(depth_info.k) == list(info.k) and (info.width, info.height) == (64, 48)
    # The robot's cameras keep their topics and unprefixed frames, and show the robot's views, not the human's.
    for view in robot_views.views:
        rgb = received[f"/camera/{view.name}/image_raw"][-1]
        assert rgb.header.frame_id == convert.optical_frame(view.name)
    assert not np.array_equal(convert.image_from_msg(received["/camera/front/image_raw"][-1]),
                              convert.image_from_msg(received["/human/camera/front/image_raw"][-1]))


def test_both_agents_camera_mounts_are_latched_and_chain_to_the_views(wired):
    """/tf_static's one latched message holds both agents' mounts; odom -> human/base_link -> the human's optical
    frame is the camera pose of the human's view (as for the robot in tests/ros/test_ros_tf.py)."""
    from homie_msgs.srv import ResetEpisode

    from homiebot.ros import convert
    from homiebot.testing.ros_helpers import tf_edges

    bridge, sim, received, spin = wired
    assert bridge._on_reset(ResetEpisode.Request(scene="apartment_1", seed=0), ResetEpisode.Response()).success
    robot_views = _render(bridge, bridge._on_render)
    human_views = _render(bridge, bridge._on_human_render)

    def mounts_of_both() -> bool:
        if not received["/tf_static"]:
            return False
        parents = {t.header.frame_id for t in received["/tf_static"][-1].transforms}
        return parents == {"base_link", "human/base_link"}

    spin(lambda: mounts_of_both() and any(t.child_frame_id == "human/base_link" for m in received["/tf"] for t in m.transforms)
         and any(t.child_frame_id == "base_link" for m in received["/tf"] for t in m.transforms))
    static = tf_edges([received["/tf_static"][-1]])  # the latest latched message alone: a late joiner's view
    assert set(static) == {("base_link", convert.optical_frame(v)) for v in VIEWS} | {
        ("human/base_link", f"human/{convert.optical_frame(v)}") for v in VIEWS}
    dynamic = tf_edges(received["/tf"])
    for prefix, views in (("", robot_views), ("human/", human_views)):
        odom_to_base = dynamic[("odom", f"{prefix}base_link")]
        for view in views.views:
            chained = odom_to_base @ static[(f"{prefix}base_link", f"{prefix}{convert.optical_frame(view.name)}")]
            np.testing.assert_allclose(chained, convert.pose_to_matrix(view.camera_pose), atol=1e-6)
    # Rendering again with nothing moved sends no new static message (the mounts are latched once).
    count = len(received["/tf_static"])
    _render(bridge, bridge._on_human_render)
    spin(lambda: False, timeout=0.5)
    assert len(received["/tf_static"]) == count
