"""A client of the HomieBot graph written as an outsider would: rclpy, homie_msgs and standard messages only.

It imports nothing from the project's Python package. Against a running graph (sim bridge and executors,
no planner) it:

1. resets the simulator to a scene (``/sim/reset``, homie_msgs/srv/ResetEpisode);
2. reads the four views from the standard per-camera topics (``/camera/<view>/image_raw``,
   sensor_msgs/Image) and their intrinsics (``/camera/<view>/camera_info`` and, beside the depth image,
   ``/camera/<view>/depth/camera_info``) after asking the bridge to render (``/sim/render_views``);
3. sends ExecuteSubtask goals (``/homie/execute_subtask``) and prints each result.

Single-threaded, the textbook way: every call is followed by ``rclpy.spin_until_future_complete``.
Output: one JSON object on stdout. Usage: ``python raw_client.py SCENE "Go to,fridge" "Open,fridge" ...``
"""

from __future__ import annotations

import json
import sys
import time

import rclpy
from homie_msgs.action import ExecuteSubtask
from homie_msgs.msg import Feedback, Subtask
from homie_msgs.srv import RenderViews, ResetEpisode
from rclpy.action import ActionClient
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image

VIEWS = ("front", "left", "back", "right")
#: The low-level model EMMOE names for each action (table E2).
MODELS = {"Go to": "NoMaD", "Pick": "RT-1-X", "Put": "RT-1-X", "Open": "octo", "Close": "octo"}
CODE_NAMES = {getattr(Feedback, n): n for n in ("OK", "L1", "L2", "L3", "L4", "D1", "D2", "F1", "F2", "E1", "E2")}


def wait(node, future, timeout: float):
    rclpy.spin_until_future_complete(node, future, timeout_sec=timeout)
    if not future.done():
        raise TimeoutError("no answer")
    return future.result()


def run(node, scene: str, subtasks: list[list[str]]) -> int:
    images: dict[str, Image] = {}
    infos: dict[str, CameraInfo] = {}
    depth_infos: dict[str, CameraInfo] = {}
    qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    for view in VIEWS:
        node.create_subscription(Image, f"/camera/{view}/image_raw", lambda msg, view=view: images.__setitem__(view, msg), qos)
        # The intrinsics beside each image, as depth_image_proc looks for them.
        node.create_subscription(CameraInfo, f"/camera/{view}/camera_info", lambda msg, view=view: infos.__setitem__(view, msg), qos)
        node.create_subscription(CameraInfo, f"/camera/{view}/depth/camera_info",
                                 lambda msg, view=view: depth_infos.__setitem__(view, msg), qos)

    reset = node.create_client(ResetEpisode, "/sim/reset")
    render = node.create_client(RenderViews, "/sim/render_views")
    if not (reset.wait_for_service(timeout_sec=60) and render.wait_for_service(timeout_sec=60)):
        print(json.dumps({"error": "sim bridge not found"}))
        return 1
    response = wait(node, reset.call_async(ResetEpisode.Request(scene=scene, seed=0)), 60)
    if not response.success:
        print(json.dumps({"error": response.message}))
        return 1
    # The camera topics are published when subscribed: render until the bridge has matched our subscriptions.
    deadline = time.monotonic() + 30
    while min(len(images), len(infos), len(depth_infos)) < 4 and time.monotonic() < deadline:
        wait(node, render.call_async(RenderViews.Request()), 30)
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
    views = {v: {"encoding": m.encoding, "height": m.height, "width": m.width, "bytes": len(m.data),
                 "frame": m.header.frame_id, "mean": sum(m.data[::97]) / len(m.data[::97])} for v, m in images.items()}
    for v, info in infos.items():
        views[v]["camera_info"] = {"k": list(info.k), "size": [info.height, info.width], "frame": info.header.frame_id}
    for v, info in depth_infos.items():
        views[v]["depth_camera_info"] = {"k": list(info.k), "size": [info.height, info.width], "frame": info.header.frame_id}

    client = ActionClient(node, ExecuteSubtask, "/homie/execute_subtask")
    if not client.wait_for_server(timeout_sec=60):
        print(json.dumps({"error": "executor not found", "views": views}))
        return 1
    results = []
    inventory: list[str] = []
    for parts in subtasks:
        action, target = parts[0].strip(), parts[1].strip()
        goal = ExecuteSubtask.Goal(subtask=Subtask(action=action, target=target, has_target=True),
                                   model=MODELS.get(action, "NoMaD"), inventory=inventory, round_index=len(results) + 1)
        phases: list[str] = []
        handle = wait(node, client.send_goal_async(goal, feedback_callback=lambda f, phases=phases: phases.append(f.feedback.phase)), 60)
        result = wait(node, handle.get_result_async(), 120).result
        inventory = list(result.feedback.inventory)
        results.append({"subtask": f"[{action}, {target}]", "code": CODE_NAMES[result.feedback.code],
                        "message": result.feedback.message, "inventory": inventory, "phases": phases})
    print(json.dumps({"views": views, "results": results}))
    return 0


def main() -> int:
    scene, subtasks = sys.argv[1], [s.split(",") for s in sys.argv[2:]]
    rclpy.init()
    node = rclpy.create_node("outside_client")
    try:
        return run(node, scene, subtasks)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
