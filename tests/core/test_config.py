"""The shared defaults and choice enums (homiebot/config.py; docs/architecture.md, "Configuration")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from homiebot.config import (
    GRAPH_BUILDERS,
    MAX_ROUNDS,
    DecodeMode,
    NoiseMode,
    PerceptionMode,
    choices,
    decode_mode,
    perception_mode,
)
from homiebot.eval.manifest import EvalSettings

HOMIE = str(Path(sys.executable).with_name("homie"))


def test_perception_mode_parses_every_choice_and_names_them_on_a_bad_one() -> None:
    for mode in PerceptionMode:
        assert perception_mode(mode.value) is mode
    with pytest.raises(ValueError, match=r"^unknown --perception 'nope'; choose off, privileged or conceptgraph$"):
        perception_mode("nope")
    assert GRAPH_BUILDERS == ("privileged", "conceptgraph")
    assert choices(PerceptionMode) == "off, privileged or conceptgraph"


@pytest.mark.slow
def test_homie_up_refuses_an_unknown_perception_with_the_enums_choices(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = subprocess.run([HOMIE, "up", "sim", "--task", "demo-drawer", "--perception", "nope", "--out", str(out)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: unknown --perception 'nope'; choose off, privileged or conceptgraph"
    assert not out.exists()


def test_choices_read_as_their_values() -> None:
    # str() and f-strings give the value on every supported Python (3.10's str enums format as Class.MEMBER).
    assert f"{NoiseMode.EMMOE}" == str(NoiseMode.EMMOE) == "emmoe"
    assert f"{DecodeMode.FAST:>6}" == "  fast"
    assert json.dumps({"decode": DecodeMode.GENERATE}) == '{"decode": "generate"}'
    assert decode_mode("fast") is DecodeMode.FAST
    with pytest.raises(ValueError, match=r"^unknown --decode 'greedy'; choose auto, fast or generate$"):
        decode_mode("greedy")


def test_eval_settings_take_the_core_defaults_and_enums() -> None:
    settings = EvalSettings.model_validate({"noise": "emmoe", "perception": "privileged"})
    assert settings.noise is NoiseMode.EMMOE and settings.perception is PerceptionMode.PRIVILEGED
    assert settings.max_rounds == MAX_ROUNDS
    assert settings.label() == "expert planner, noise emmoe, perception privileged"
    pinned = settings.model_dump(mode="json")
    assert (pinned["noise"], pinned["perception"]) == ("emmoe", "privileged")
    assert EvalSettings.model_validate(pinned) == settings
    assert EvalSettings().self_reference and not settings.self_reference
    with pytest.raises(ValidationError, match="noise"):
        EvalSettings.model_validate({"noise": "loud"})


@pytest.mark.parametrize("command", [["run", "--task", "demo-drawer"], ["eval", "--suite", "demo"],
                                     ["up", "sim", "--task", "demo-drawer"]])
@pytest.mark.slow
def test_run_eval_and_up_refuse_an_unknown_decode_mode(command: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = subprocess.run([HOMIE, *command, "--decode", "greedy", "--out", str(out)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: unknown --decode 'greedy'; choose auto, fast or generate"
    assert not out.exists()


def test_the_perception_options_builders_are_the_graph_builders() -> None:
    # PerceptionConfig validates YAML and command-line text with a Literal (pydantic's precise error); its values
    # must stay the PerceptionMode members that build a graph.
    from homiebot.perception.world_model import PerceptionConfig

    assert get_args(PerceptionConfig.model_fields["builder"].annotation) == GRAPH_BUILDERS
