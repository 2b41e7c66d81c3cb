"""The Foxglove app layout for the live view, built with the SDK's own layout classes (``foxglove.layouts``) so
that it follows the app's format; ``docs/foxglove/homiebot_layout.json`` is its output (a test keeps the two
equal). Import it in the app with Layouts > Import from file.

Arrangement: the four camera views in a row on top; below, the 3D panel (world graph boxes and labels, the
robot's pose and path, /tf, following ``base_link`` in the ``map`` frame) beside the planner's log lines.
"""

from __future__ import annotations

import json
from pathlib import Path

from homiebot.live.foxglove_view import BASE_FRAME, MAP_FRAME
from homiebot.types import VIEW_NAMES

#: Where the generated layout lives in the repository.
LAYOUT_PATH = Path(__file__).resolve().parents[2] / "docs" / "foxglove" / "homiebot_layout.json"


def build_layout() -> str:
    """The layout as the app's JSON (sorted keys, indented: a stable file to commit)."""
    import foxglove.layouts as fl

    cameras = fl.SplitContainer(
        direction="row",
        items=[
            fl.SplitItem(
                proportion=1,
                content=fl.ImagePanel(
                    title=f"{view} view",
                    config=fl.ImageConfig(image_mode=fl.ImageModeConfig(image_topic=f"/camera/{view}/image")),
                ),
            )
            for view in VIEW_NAMES
        ],
    )
    scene = fl.ThreeDeePanel(
        title="world graph, pose and path",
        config=fl.ThreeDeeConfig(
            follow_tf=BASE_FRAME,
            fixed_frame=MAP_FRAME,
            topics={
                "/world_graph": fl.BaseRendererSceneUpdateTopicSettings(visible=True),
                "/robot/pose": fl.BaseRendererPoseTopicSettings(visible=True),
                "/robot/path": fl.BaseRendererPosesTopicSettings(visible=True),
            },
        ),
    )
    logs = fl.LogPanel(title="subtasks and feedback", config=fl.LogConfig(topic_to_render="/planner/log"))
    layout = fl.Layout(
        content=fl.SplitContainer(
            direction="column",
            items=[
                fl.SplitItem(proportion=1, content=cameras),
                fl.SplitItem(
                    proportion=2,
                    content=fl.SplitContainer(
                        direction="row",
                        items=[fl.SplitItem(proportion=2, content=scene), fl.SplitItem(proportion=1, content=logs)],
                    ),
                ),
            ],
        )
    )
    return json.dumps(json.loads(layout.to_json()), indent=2, sort_keys=True) + "\n"
