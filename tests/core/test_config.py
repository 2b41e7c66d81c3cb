"""The shared defaults and choice enums (homiebot/config.py; docs/architecture.md, "Configuration")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from homiebot.config import GRAPH_BUILDERS, PerceptionMode, choices, perception_mode

HOMIE = str(Path(sys.executable).with_name("homie"))


def test_perception_mode_parses_every_choice_and_names_them_on_a_bad_one() -> None:
    for mode in PerceptionMode:
        assert perception_mode(mode.value) is mode
    with pytest.raises(ValueError, match=r"^unknown --perception 'nope'; choose off, privileged or conceptgraph$"):
        perception_mode("nope")
    assert GRAPH_BUILDERS == ("privileged", "conceptgraph")
    assert choices(PerceptionMode) == "off, privileged or conceptgraph"


def test_homie_up_refuses_an_unknown_perception_with_the_enums_choices(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = subprocess.run([HOMIE, "up", "sim", "--task", "demo-drawer", "--perception", "nope", "--out", str(out)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: unknown --perception 'nope'; choose off, privileged or conceptgraph"
    assert not out.exists()
