"""On/in inference from support geometry (the rules of homiebot/perception/relations.py)."""

from __future__ import annotations

import pytest

from homiebot.perception.geometry import Box3
from homiebot.perception.relations import SupportTolerances, infer_placement
from homiebot.perception.world_graph import Relation

COUNTER = ("counter", Box3((1.0, 3.0, 0.0), (3.0, 3.6, 0.9)))
FRIDGE = ("fridge", Box3((0.2, 0.2, 0.0), (0.9, 0.9, 1.8)))
TRAY = ("tray", Box3((1.2, 3.1, 0.9), (1.6, 3.4, 0.93)))
DRAWER = ("drawer", Box3((2.0, 3.0, 0.5), (2.6, 3.6, 0.8)))
# an open fridge door swung out over the counter's end widens the fridge's observed box
OPEN_FRIDGE = ("open_fridge", Box3((0.2, 0.2, 0.0), (1.6, 3.5, 1.8)))


def obj(x: float, y: float, bottom: float, size: float = 0.08) -> Box3:
    h = size / 2
    return Box3((x - h, y - h, bottom), (x + h, y + h, bottom + size))


@pytest.mark.parametrize(
    "box, furniture, expected",
    [
        (obj(2.0, 3.3, 0.90), [COUNTER, FRIDGE], ("counter", Relation.ON)),  # resting on the top
        (obj(2.0, 3.3, 0.94), [COUNTER], ("counter", Relation.ON)),  # observed bottom 4 cm high: depth noise
        (obj(2.0, 3.3, 1.10), [COUNTER], None),  # floating 20 cm above: not supported
        (obj(3.03, 3.3, 0.90), [COUNTER], ("counter", Relation.ON)),  # centre overhangs the observed edge by 3 cm
        (obj(3.30, 3.3, 0.90), [COUNTER], None),  # beside the counter at the same height
        (obj(0.5, 0.5, 0.60), [COUNTER, FRIDGE], ("fridge", Relation.IN)),  # on an inner shelf
        (obj(1.4, 3.3, 0.93), [COUNTER, TRAY], ("tray", Relation.ON)),  # on the tray on the counter
        (obj(2.3, 3.3, 0.55), [COUNTER, DRAWER], ("drawer", Relation.IN)),  # smallest container wins
        (obj(1.4, 3.3, 0.90), [OPEN_FRIDGE, COUNTER], ("counter", Relation.ON)),  # support beats containment
        (obj(5.0, 5.0, 0.0), [COUNTER, FRIDGE], None),  # on the floor
        (obj(0.5, 0.5, 1.78), [FRIDGE], ("fridge", Relation.ON)),  # on top of the fridge
    ],
)
def test_infer_placement(box, furniture, expected):
    assert infer_placement(box, furniture) == expected


def test_tolerances_are_configurable():
    loose = SupportTolerances(on_gap=0.25)
    assert infer_placement(obj(2.0, 3.3, 1.10), [COUNTER], loose) == ("counter", Relation.ON)
