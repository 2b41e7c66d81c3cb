"""The ``homie`` vocabulary: one spelling per thing, shared by every command that takes it (docs/commands.md,
"One vocabulary").

The rules, checked over the whole app by ``tests/cli/test_vocabulary.py``:

* an option names the same thing with the same flags in every command (``--out/-o`` for every output, ``--task/-t``
  for one task, ``--tasks`` and ``--limit`` for a selection, ``--planner`` for the robot's planner and
  ``--partner-planner`` for the human's, ``--simulator`` for the simulator backend, ``--noise``, ...);
* the model planner's options (``--model``, ``--adapter``, ``--base-url``, ``--api-key-env``, ``--constrained``,
  ``--decode``, ``-p``) and the recovery options are defined once, here, and used by ``homie run``, ``homie eval``
  and ``homie up sim``; their choices come from the configuration types (:mod:`homiebot.config`);
* an old spelling stays for one release as a hidden option that still works and prints one line, ``warning:
  --backend is deprecated and will be removed in the next release; use --simulator`` (:func:`deprecated`).

Why typer Options built by functions and not a generated signature: typer reads each command's signature, so a
shared option is a shared default value object; building it in a function gives each command its own copy with
the same flags and help.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

import typer

from homiebot.config import ArticulationMode, DecodeMode, NoiseMode, PerceptionMode, SkillsMode, choices

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The release after which the deprecated spellings below go away (the notice names it).
REMOVED_IN = "the next release"


def warn_deprecated(old: str, new: str) -> None:
    """One line on stderr for an old spelling (the command goes on with the new one's meaning)."""
    typer.echo(f"warning: {old} is deprecated and will be removed in {REMOVED_IN}; use {new}", err=True)


def deprecated(old: str, new: str, old_value: T | None, new_value: T | None, *, default: T | None = None) -> T | None:
    """The value of an option whose old spelling ``old`` is still taken: the new one's when given (both given with
    different values: refused), else the old one's with a notice."""
    if old_value is None or old_value == default:
        return new_value
    warn_deprecated(old, new)
    if new_value is not None and new_value not in (default, old_value):
        from homiebot.cli.failures import fail

        fail(f"{old} and {new} are the same option (give {new} only)")
    return old_value


def hidden(old: str, default: Any = None, **kwargs: Any) -> Any:
    """A deprecated spelling: still parsed, not shown in ``--help``."""
    return typer.Option(default, old, hidden=True, **kwargs)


# --- one spelling per thing -------------------------------------------------------------------------------------


def out_option(help_text: str, *, required: bool = True) -> Any:
    """Every command's output: ``--out/-o``."""
    return typer.Option(... if required else None, "--out", "-o", help=help_text)


def planner_option(help_text: str, default: str | None = None) -> Any:
    return typer.Option(default, "--planner", help=help_text)


def partner_planner_option(help_text: str, default: str | None = None) -> Any:
    return typer.Option(default, "--partner-planner", help=help_text)


def simulator_option(help_text: str = "Simulator backend (default mujoco).") -> Any:
    return typer.Option(None, "--simulator", help=help_text)


def noise_option(default: str | None = None, what: str = "Execution noise of the skill layer") -> Any:
    return typer.Option(
        default, "--noise", help=f"{what}: {choices(NoiseMode)} (EMMOE table 4 success rates; default off)."
    )


def skills_option(default: str | None = None) -> Any:
    return typer.Option(
        default, "--skills",
        help=f"How the skills act: {choices(SkillsMode)} (oracle: the simulator places things; physical: NavigateToPose, "
             "FollowJointTrajectory and GripperCommand under physics, docs/robots.md; default oracle).",
    )


def articulation_option() -> Any:
    return typer.Option(
        None, "--articulation",
        help=f"How --skills physical opens and closes doors and drawers: {choices(ArticulationMode)} (physical: the arm "
             "pulls or pushes the door by its handle or edge under physics; oracle: the simulator sets the joint to its "
             "end; default physical, docs/robots.md).",
    )


def parse_articulation(articulation: str | None, skills: str | None) -> str | None:
    """``--articulation``'s value, checked (ValueError with one line: an unknown value, or given without ``--skills
    physical``; ``skills``: the mode the run will have)."""
    if articulation is None:
        return None
    if articulation not in {m.value for m in ArticulationMode}:
        raise ValueError(f"--articulation {articulation!r}: use {choices(ArticulationMode)}")
    if skills != SkillsMode.PHYSICAL.value:
        raise ValueError("--articulation needs --skills physical (the oracle skills' Open and Close set the joint)")
    return articulation


def skill_model_option() -> Any:
    return typer.Option(
        [], "--skill-model", metavar="MODEL=DIR",
        help="A learned policy in a low-level model's slot: MODEL one of RT-1-X, octo, NoMaD, PixNav (any case), DIR a "
             "LeRobot policy folder (homie train skill's OUT/policy, or your own with the same inputs); the Pick (RT-1-X, "
             "octo) or Go to (NoMaD, PixNav) the planner sends with that model runs it closed-loop. Repeatable; needs "
             "--skills physical (docs/skills.md).",
    )


def perception_option(default: str | None = None, what: str = "World graph the episode grounds through") -> Any:
    return typer.Option(
        default, "--perception", help=f"{what}: {choices(PerceptionMode)} (off: the scene's names, as EMMOE)."
    )


class ModelOptions:
    """The model planners' options, spelled alike in ``homie run``, ``homie eval`` and ``homie up sim``: the keys of
    :class:`homiebot.config.planners.HFPlannerConfig` and the OpenAI planner's config that the CLI names directly
    (anything else goes through ``-p key=value``)."""

    @staticmethod
    def base_url() -> Any:
        return typer.Option(None, "--base-url", help="Model planners: OpenAI-compatible server URL.")

    @staticmethod
    def model() -> Any:
        return typer.Option(
            None, "--model", help="Model planners: a model name (a bundled or shipped one, homie run --help) or folder."
        )

    @staticmethod
    def adapter() -> Any:
        return typer.Option(
            None, "--adapter",
            help="hf planner: a LoRA adapter folder (homie train sft|dpo) on --model's folder (docs/training.md).",
        )

    @staticmethod
    def api_key_env() -> Any:
        return typer.Option(None, "--api-key-env", help="Model planners: environment variable holding the API key.")

    @staticmethod
    def constrained() -> Any:
        return typer.Option(None, "--constrained/--no-constrained", help="Model planners: constrained decoding.")

    @staticmethod
    def decode() -> Any:
        return typer.Option(
            None, "--decode", help=f"hf planner: greedy decoding loop, {choices(DecodeMode)} (default {DecodeMode.AUTO})."
        )

    @staticmethod
    def options() -> Any:
        return typer.Option([], "--planner-option", "-p", help="Other planner option key=value (repeatable).")


class RecoveryOptions:
    """Failure recovery around the planner (docs/recovery.md), alike in ``homie run``, ``homie eval``, ``homie up``."""

    @staticmethod
    def recovery() -> Any:
        return typer.Option(None, "--recovery", help="Failure recovery around the planner: cmfr, cot or none (docs/recovery.md).")

    @staticmethod
    def stages() -> Any:
        return typer.Option(None, "--recovery-stages", help="--recovery cmfr: its stages, e.g. 1,2 (default 1,2,3,4).")

    @staticmethod
    def search() -> Any:
        return typer.Option(
            None, "--recovery-search/--no-recovery-search",
            help="--recovery: object search from the places the task names (default on).",
        )
