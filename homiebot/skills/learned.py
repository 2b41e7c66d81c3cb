"""A learned skill policy: a LeRobot policy folder that, given the robot's observation (camera images, joint state),
returns the next action (docs/skill-data.md, "Training a skill policy"; the learned-skills issue's model slots).

The folder is what ``homie train skill`` writes (``OUT/policy``, or any checkpoint's ``pretrained_model``), or a user's
own LeRobot checkpoint with the same inputs and outputs: LeRobot's ``config.json`` + ``model.safetensors`` and its
pre/post-processor pipelines (``policy_preprocessor.json``, ``policy_postprocessor.json`` and their state files).
Everything runs through LeRobot: the policy class its config names (``get_policy_class``), ``from_pretrained``, the
processors loaded by ``make_pre_post_processors(config, pretrained_path=...)`` (normalisation with the training data's
statistics), and ``select_action``, which keeps ACT's action chunk and returns one action per call (it runs the network
once every ``n_action_steps`` calls).

Observations are given as a skill's recorder writes them (:mod:`homiebot.data.skill_datasets`): images by camera name
(``head``, ``wrist``, ``goal``) as ``H x W x 3`` uint8 RGB, the state as a float vector (the joints' positions for the
arm's skills, the goal pose in the base's frame for Go to). The returned action is in the data set's units (the
joints' position targets, or the base's velocity). Running it closed-loop in a skill slot:
:mod:`homiebot.skills.learned_skill` (``--skill-model``).

LeRobot is imported only when a policy is loaded (:class:`SkillPolicyError` with how to get it where it is missing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

IMAGE_PREFIX = "observation.images."
STATE = "observation.state"
ENV_STATE = "observation.environment_state"
ACTION = "action"


class SkillPolicyError(ValueError):
    """A policy folder cannot be loaded or an observation does not fit it (one line for the user)."""


@dataclass(frozen=True)
class PolicyInputs:
    """What a policy folder takes and gives (from its LeRobot config)."""

    policy_type: str
    images: dict[str, tuple[int, int, int]]  # camera name -> (channels, height, width)
    state_size: int | None
    env_state_size: int | None  # the target's box of the arm's skills (homiebot.data.skill_datasets.TARGET_STATE)
    action_size: int
    n_action_steps: int


def read_inputs(folder: str | Path) -> PolicyInputs:
    """The inputs and outputs a LeRobot policy folder's ``config.json`` declares (no LeRobot needed)."""
    path = Path(folder).expanduser()
    config_file = path / "config.json"
    if not path.is_dir():
        raise SkillPolicyError(f"policy {path} is not a folder")
    if not config_file.is_file() or not (path / "model.safetensors").is_file():
        raise SkillPolicyError(f"policy {path}: no config.json and model.safetensors; not a LeRobot policy folder")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        inputs = config["input_features"]
        outputs = config["output_features"]
        images = {key[len(IMAGE_PREFIX):]: tuple(int(x) for x in value["shape"])
                  for key, value in inputs.items() if key.startswith(IMAGE_PREFIX)}
        state = inputs.get(STATE)
        env_state = inputs.get(ENV_STATE)
        return PolicyInputs(
            policy_type=str(config["type"]),
            images=images,  # type: ignore[arg-type]
            state_size=int(state["shape"][0]) if state else None,
            env_state_size=int(env_state["shape"][0]) if env_state else None,
            action_size=int(outputs[ACTION]["shape"][0]),
            n_action_steps=int(config.get("n_action_steps", 1)),
        )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as err:
        raise SkillPolicyError(f"policy {path}: config.json does not describe a LeRobot policy ({err})") from None


class SkillPolicy:
    """A loaded LeRobot policy that maps one observation to the next action (module docstring)."""

    def __init__(self, folder: str | Path, *, threads: int = 1) -> None:
        self.folder = Path(folder).expanduser().absolute()
        self.inputs = read_inputs(self.folder)
        try:
            import torch
            from lerobot.configs.policies import PreTrainedConfig
            from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        except ImportError as err:
            raise SkillPolicyError(
                f"a learned skill policy needs LeRobot (lerobot==0.6.1, Python >= 3.12), which this Python cannot "
                f"import ({err}); see docs/skill-data.md"
            ) from None
        self._torch = torch
        torch.set_num_threads(threads)
        config = PreTrainedConfig.from_pretrained(str(self.folder))
        config.device = "cpu"
        try:
            self.policy = get_policy_class(config.type).from_pretrained(str(self.folder), config=config)
        except (ValueError, NotImplementedError, ImportError) as err:
            raise SkillPolicyError(f"policy {self.folder}: LeRobot cannot load it ({err})") from None
        self.policy.eval()
        self.preprocess, self.postprocess = make_pre_post_processors(config, pretrained_path=str(self.folder))

    def reset(self) -> None:
        """Start a new episode (drops the action chunk in progress)."""
        self.policy.reset()

    def observation(self, images: Mapping[str, np.ndarray], state: np.ndarray | None,
                    env_state: np.ndarray | None = None) -> dict[str, Any]:
        """LeRobot's observation batch of one frame: images as float (3, H, W) in [0, 1], the state (and the
        environment state, where the policy takes one) as float32."""
        torch = self._torch
        batch: dict[str, Any] = {}
        for name, (channels, height, width) in self.inputs.images.items():
            if name not in images:
                raise SkillPolicyError(f"policy {self.folder} takes camera {name!r}; given {sorted(images)}")
            image = np.asarray(images[name])
            if image.shape != (height, width, channels):
                raise SkillPolicyError(
                    f"camera {name!r}: the policy takes {height}x{width}x{channels} images, given {image.shape}"
                )
            scale = 255.0 if image.dtype == np.uint8 else 1.0
            batch[IMAGE_PREFIX + name] = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).float() / scale
        if self.inputs.state_size is not None:
            if state is None or np.shape(state) != (self.inputs.state_size,):
                raise SkillPolicyError(
                    f"the policy takes a state of {self.inputs.state_size} values, given {None if state is None else np.shape(state)}"
                )
            batch[STATE] = torch.as_tensor(np.asarray(state, dtype=np.float32))
        if self.inputs.env_state_size is not None:
            if env_state is None or np.shape(env_state) != (self.inputs.env_state_size,):
                raise SkillPolicyError(
                    f"the policy takes an environment state (the target's box) of {self.inputs.env_state_size} "
                    f"values, given {None if env_state is None else np.shape(env_state)}"
                )
            batch[ENV_STATE] = torch.as_tensor(np.asarray(env_state, dtype=np.float32))
        return batch

    def act(self, images: Mapping[str, np.ndarray], state: np.ndarray | None = None,
            env_state: np.ndarray | None = None) -> np.ndarray:
        """The next action (float64, the data set's units) for this observation (LeRobot's ``select_action``)."""
        torch = self._torch
        with torch.inference_mode():
            batch = self.preprocess(self.observation(images, state, env_state))
            action = self.postprocess(self.policy.select_action(batch))
        return np.asarray(action.reshape(-1).cpu().numpy(), dtype=np.float64)
