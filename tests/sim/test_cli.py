"""``homie sim``: scenes, validate, render; bad input exits non-zero with a precise message."""

from __future__ import annotations

import json

import numpy as np
import yaml
from PIL import Image
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.sim.scene import SCENE_DIR, list_scenes

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(build_app(), ["sim", *args])


def scene_data() -> dict:
    return yaml.safe_load((SCENE_DIR / "apartment_1.yaml").read_text())


def test_scenes_lists_the_library_one_per_line():
    result = invoke("scenes")
    assert result.exit_code == 0
    assert result.output.splitlines() == list_scenes()
    assert "apartment_1" in result.output.splitlines()


def test_validate_accepts_a_library_scene():
    result = invoke("validate", str(SCENE_DIR / "apartment_1.yaml"))
    assert result.exit_code == 0, result.output
    assert "ok (2 rooms, 11 furniture, 7 objects)" in result.output


def test_validate_names_the_field_at_fault(tmp_path):
    data = scene_data()
    data["furniture"][0]["articulation"]["kind"] = "swing"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert "furniture.0.articulation.kind" in result.output and "hinged" in result.output


def test_validate_reports_a_misspelt_field(tmp_path):
    data = scene_data()
    data["objects"][0]["colour"] = "red"
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    result = invoke("validate", str(path))
    assert result.exit_code == 2 and "objects.0.colour" in result.output


def test_validate_reports_an_unplaceable_object(tmp_path):
    data = scene_data()
    for obj in data["objects"]:
        obj.pop("on", None)
        obj.pop("in", None)
        obj["on"] = "brown_table"
    data["objects"] += [dict(data["objects"][0], name=f"apple_{i}") for i in range(60)]
    path = tmp_path / "crowded.yaml"
    path.write_text(yaml.safe_dump(data))
    result = invoke("validate", str(path))
    assert result.exit_code == 2 and "no free spot on brown_table" in result.output


def test_render_unknown_scene_lists_the_available_ones(tmp_path):
    result = invoke("render", "--scene", "castle", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "unknown scene 'castle'" in result.output and "apartment_1" in result.output
    assert not (tmp_path / "out").exists()


def test_render_writes_views_depth_segmentation_and_map(tmp_path):
    out = tmp_path / "render"
    result = invoke("render", "--scene", "apartment_1", "--out", str(out), "--seed", "2", "--size", "128")
    assert result.exit_code == 0, result.output
    for view in ("front", "left", "back", "right"):
        for kind in ("rgb", "depth", "seg"):
            image = np.asarray(Image.open(out / f"{view}_{kind}.png"))
            assert image.shape == (128, 128, 3)
        depth = np.load(out / f"{view}_depth.npy")
        assert depth.shape == (128, 128) and depth.max() > 1.0
    assert np.asarray(Image.open(out / "topdown.png")).shape == (768, 768, 3)
    legend = json.loads((out / "instances.json").read_text())
    assert legend["1"] == "kitchen" and "apple" in legend.values()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left behind
