"""Skills: the layer between the executor and the simulator's oracle skills.

* :mod:`.skillset`: :class:`SkillSet` maps EMMOE's low-level model names (NoMaD, PixNav, octo, RT-1-X,
  M3, oracle) to skills and runs one attempt at a time (the executor's ``SkillRunner``);
* :mod:`.noise`: :class:`NoiseConfig` and its presets (``noiseless``, ``emmoe_table4``), :func:`preset_name`
  (the command lines' aliases ``off`` and ``emmoe``).
"""

from homiebot.skills.noise import (
    EMMOE_TABLE4_SR_PERCENT,
    PRESET_ALIASES,
    PRESETS,
    ExecutionNoise,
    NoiseConfig,
    preset_name,
)
from homiebot.skills.skillset import (
    DEFAULT_SKILLS,
    MANIPULATION_MODELS,
    NAVIGATION_MODELS,
    UNIVERSAL_MODELS,
    PerceivedWorld,
    PlansInPerceivedWorld,
    Skill,
    SkillSet,
    UnservedModelError,
)

__all__ = [
    "DEFAULT_SKILLS",
    "EMMOE_TABLE4_SR_PERCENT",
    "MANIPULATION_MODELS",
    "NAVIGATION_MODELS",
    "PRESETS",
    "PRESET_ALIASES",
    "PerceivedWorld",
    "PlansInPerceivedWorld",
    "UNIVERSAL_MODELS",
    "ExecutionNoise",
    "NoiseConfig",
    "Skill",
    "SkillSet",
    "UnservedModelError",
    "preset_name",
]
