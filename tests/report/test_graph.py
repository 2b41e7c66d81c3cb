"""The world-graph drawing of the episode page: the hierarchy of the scene file and where the episode left objects."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from homiebot.report.graph import Placement, final_placements, world_graph_svg
from homiebot.sim.scene import load_scene


def test_final_placements_follow_successful_picks_and_puts() -> None:
    steps = [
        ("Pick", "apple", None, True),
        ("Put", "apple", "fridge", False),  # failed: the apple stays in the hand
        ("Pick", "mug", None, True),
        ("Put", "mug", "kitchen_counter", True),
        ("Go to", "sofa", None, True),
    ]
    assert final_placements(steps) == {"apple": Placement("held", None), "mug": Placement("", "kitchen_counter")}


def _labels(svg: str) -> list[str]:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    return ["".join(t.itertext()).strip() for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_svg_draws_the_scene_hierarchy_and_moves() -> None:
    spec = load_scene("apartment_1")
    svg = world_graph_svg(spec, highlight={"fridge"}, placements={"apple": Placement("", "fridge"),
                                                                  "mug": Placement("held", None)})
    labels = _labels(svg)
    names = {label.split()[-1] for label in labels}
    assert {r.name for r in spec.rooms} | {f.name for f in spec.furniture} <= names
    assert len(labels) == 1 + len(spec.rooms) + len(spec.furniture) + len(spec.objects) + 1  # house, robot
    apple = spec.object_by_name("apple")
    assert f"in apple  (was {apple.relation} {apple.parent})" in labels
    mug = spec.object_by_name("mug")
    assert f"held mug  (was {mug.relation} {mug.parent})" in labels
    # The highlighted name is drawn bold on a band; the others are not.
    assert len(re.findall(r'font-weight="bold"', svg)) == 1 and 'fill="#fff3b0"' in svg
    # The held mug is drawn under the robot, the last row of the tree.
    assert labels[-1].startswith("held mug")
