"""Scene description validation: errors name the field at fault."""

from __future__ import annotations

import pytest

from homiebot.sim.scene import SceneError, load_scene, parse_scene

BASE = {
    "name": "mini",
    "rooms": [{"name": "kitchen", "category": "kitchen", "polygon": [[0, 0], [4, 0], [4, 4], [0, 4]]}],
    "furniture": [
        {"name": "fridge", "category": "refrigerator", "pose": {"x": 1, "y": 1}, "size": [0.7, 0.7, 1.8],
         "interior": {"min": [-0.3, -0.3, 0.1], "max": [0.3, 0.3, 1.7]},
         "articulation": {"kind": "hinged"}, "interactive": True},
        {"name": "counter", "category": "counter", "pose": {"x": 3, "y": 1}, "size": [1.5, 0.6, 0.9],
         "surfaces": [{"height": 0.9}]},
    ],
    "objects": [{"name": "apple", "category": "apple", "on": "counter"}],
    "robot": {"start": {"x": 2, "y": 3}},
}


def test_minimal_scene_parses():
    scene = parse_scene(BASE)
    assert scene.object_by_name("apple").parent == "counter"
    assert scene.object_by_name("apple").relation == "on"


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d["furniture"][0].update(colour="red"), "furniture.0.colour"),
        (lambda d: d["objects"][0].update(on="sofa"), "unknown furniture 'sofa'"),
        (lambda d: d["objects"][0].update({"on": None, "in": "counter"}), "has no interior"),
        (lambda d: d["objects"][0].update(position=[1, 1, 1]), "exactly one of on / in / position"),
        (lambda d: d["furniture"][1].update(color="ultraviolet"), "unknown colour"),
        (lambda d: d["objects"].append({"name": "fridge", "category": "x", "on": "counter"}), "repeated: fridge"),
        (lambda d: d.pop("robot"), "robot"),
    ],
)
def test_invalid_scene_names_the_fault(mutate, fragment):
    import copy

    data = copy.deepcopy(BASE)
    mutate(data)
    with pytest.raises(SceneError) as err:
        parse_scene(data, "mini.yaml")
    assert fragment in str(err.value)
    assert "invalid scene mini.yaml" in str(err.value)


def test_unknown_scene_lists_available(tmp_path):
    with pytest.raises(SceneError, match="unknown scene 'nowhere'; available:"):
        load_scene("nowhere")
    with pytest.raises(SceneError, match="scene file not found"):
        load_scene(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rooms: [unclosed")
    with pytest.raises(SceneError, match="not valid YAML"):
        load_scene(bad)


def test_scene_files_are_parsed_once_per_version(tmp_path):
    import os

    import yaml

    path = tmp_path / "mini.yaml"
    path.write_text(yaml.safe_dump(BASE))
    first = load_scene(path)
    assert load_scene(path) is first  # cached: a frozen spec is shared
    data = dict(BASE, name="mini2")
    path.write_text(yaml.safe_dump(data))
    os.utime(path, ns=(first_ns := path.stat().st_mtime_ns, first_ns + 10_000_000))
    assert load_scene(path).name == "mini2"  # an edited file is parsed again
    assert load_scene("apartment_1") is load_scene("apartment_1")
