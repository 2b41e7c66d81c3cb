"""A learned policy in a model slot (homiebot/skills/learned_skill.py; ``--skill-model``, docs/skills.md).

The refusals need no LeRobot: a policy folder is checked from its ``config.json`` (stand-ins with LeRobot's layout
here). The serving test records one Pick episode on the embedded simulator, trains a tiny ACT for two steps, and runs
it closed-loop for one Pick on a held-out placement through the physical skill set, as the executor calls it: the
policy must run its whole step budget (it is untrained: no success expected) and come back with EMMOE's code and a
message; it is skipped with the reason where LeRobot is not importable.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.config.planners import ConfigError
from homiebot.config.run import run_config
from homiebot.skills.learned_skill import LearnedSkillError, check_skill_model, serving, slot_name
from homiebot.types import Action


def _policy(root: Path, cameras: tuple[str, ...] = ("head", "wrist"), size: int = 32, state: int | None = 10,
            env: int | None = 6, action: int = 10, weights: bool = True) -> Path:
    """A folder with what a LeRobot policy folder's check reads (config.json, model.safetensors)."""
    root.mkdir(parents=True)
    inputs: dict[str, object] = {f"observation.images.{c}": {"type": "VISUAL", "shape": [3, size, size]} for c in cameras}
    if state is not None:
        inputs["observation.state"] = {"type": "STATE", "shape": [state]}
    if env is not None:
        inputs["observation.environment_state"] = {"type": "ENV", "shape": [env]}
    config = {"type": "act", "n_action_steps": 5, "input_features": inputs,
              "output_features": {"action": {"type": "ACTION", "shape": [action]}}}
    (root / "config.json").write_text(json.dumps(config))
    if weights:
        (root / "model.safetensors").write_bytes(b"")
    return root


def _run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(build_app(), ["run", "--task", "emmoe-012", *args])


def _one_error_line(done, *words: str) -> None:  # type: ignore[no-untyped-def]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.exit_code == 2, done.output
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert all(word in lines[0] for word in words), lines[0]


def test_slot_names_match_in_any_case_and_pick_goes_to_the_slots_policy() -> None:
    assert slot_name("rt-1-x") == "RT-1-X" and slot_name(" OCTO ") == "octo" and slot_name("nomad") == "NoMaD"
    with pytest.raises(LearnedSkillError, match="unknown model slot"):
        slot_name("gpt")

    class Arm:
        actions = frozenset({Action.PICK})

    learned = {"RT-1-X": Arm()}
    assert serving(learned, "rt-1-X", Action.PICK) is learned["RT-1-X"]  # type: ignore[comparison-overlap]
    assert serving(learned, "octo", Action.PICK) is None  # another slot: scripted
    assert serving(learned, "RT-1-X", Action.PUT) is None  # an action the policy does not serve: scripted
    assert serving(learned, "oracle", Action.PICK) is None


@pytest.mark.parametrize(
    ("slot", "make", "words"),
    [
        ("RT-1-X", lambda t: t / "missing", ("is not a folder",)),
        ("RT-1-X", lambda t: _policy(t / "p", weights=False), ("no config.json and model.safetensors", "not a LeRobot policy")),
        ("RT-1-X", lambda t: _policy(t / "p", cameras=("head", "goal"), state=3, env=None, action=2),
         ("outputs 2 values", "Go to policy")),
        ("octo", lambda t: _policy(t / "p", cameras=("front",)), ("camera(s) front", "head, wrist")),
        ("RT-1-X", lambda t: _policy(t / "p", cameras=("wrist_masked",), size=64), ("camera(s) wrist_masked", "wrist_marked")),
        ("RT-1-X", lambda t: _policy(t / "p", state=7), ("state of 7 values",)),
        ("RT-1-X", lambda t: _policy(t / "p", size=300), ("300 pixels a side", "at most 256")),
        ("RT-1-X", lambda t: _policy(t / "p", env=3), ("environment state of 3 values", "target's box")),
        ("RT-1-X", lambda t: _policy(t / "p", action=7), ("outputs 7 values", "10 joints")),
        ("NoMaD", lambda t: _policy(t / "p"), ("outputs 10 values", "an arm policy")),  # tests/skills/test_learned_goto.py
    ],
)
def test_a_policy_that_cannot_serve_is_refused_in_one_line_before_any_episode(tmp_path: Path, slot, make, words) -> None:  # type: ignore[no-untyped-def]
    folder = make(tmp_path)
    with pytest.raises(LearnedSkillError) as err:
        check_skill_model(slot, folder)
    assert all(w in str(err.value) for w in words), str(err.value)
    out = tmp_path / "record"
    done = _run("--out", str(out), "--skills", "physical", "--skill-model", f"{slot.lower()}={folder}")
    _one_error_line(done, "--skill-model", *words)
    assert not out.exists()


def test_the_policys_own_config_says_which_cameras_it_is_fed_and_whether_the_target_is_marked(tmp_path: Path) -> None:
    """The one-camera recipe (``homie data skills --cameras wrist --size 64 --mark-target``) serves in process with
    exactly its config's images; the ROS 2 graph, whose skill cameras are plain, refuses it in one line."""
    from homiebot.skills.learned_skill import check_graph_serves

    folder = _policy(tmp_path / "p", cameras=("wrist_marked",), size=64)
    assert set(check_skill_model("RT-1-X", folder).images) == {"wrist_marked"}
    with pytest.raises(LearnedSkillError, match="takes wrist_marked .* plain skill cameras only"):
        check_graph_serves("RT-1-X", folder)
    assert set(check_graph_serves("RT-1-X", _policy(tmp_path / "plain", cameras=("wrist",))).images) == {"wrist"}
    done = CliRunner().invoke(build_app(), ["up", "sim", "--task", "emmoe-012", "--skills", "physical", "--skill-model",
                                            f"RT-1-X={folder}", "--out", str(tmp_path / "up")])
    _one_error_line(done, "wrist_marked", "plain skill cameras only")
    assert not (tmp_path / "up").exists()


def test_skill_model_needs_physical_skills_and_a_known_slot(tmp_path: Path) -> None:
    folder = _policy(tmp_path / "p")
    out = tmp_path / "record"
    _one_error_line(_run("--out", str(out), "--skill-model", f"RT-1-X={folder}"), "--skill-model needs --skills physical")
    _one_error_line(_run("--out", str(out), "--skills", "oracle", "--skill-model", f"RT-1-X={folder}"),
                    "--skill-model needs --skills physical")
    _one_error_line(_run("--out", str(out), "--skills", "physical", "--skill-model", f"gpt={folder}"),
                    "unknown model slot 'gpt'")
    _one_error_line(_run("--out", str(out), "--skills", "physical", "--skill-model", str(folder)), "give MODEL=DIR")
    _one_error_line(_run("--out", str(out), "--skills", "physical", "--skill-model", f"RT-1-X={folder}",
                         "--skill-model", f"rt-1-x={folder}"), "RT-1-X is given twice")
    done = CliRunner().invoke(build_app(), ["eval", "--out", str(tmp_path / "eval"), "--tasks", "emmoe-012",
                                            "--skill-model", f"RT-1-X={folder}"])
    _one_error_line(done, "--skill-model needs --skills physical")
    assert not out.exists() and not (tmp_path / "eval").exists()
    # The run configuration (a --config file too) says the same.
    with pytest.raises(ConfigError, match="physical"):
        run_config({"task": "emmoe-012", "skills": {"mode": "oracle", "models": {"RT-1-X": str(folder)}}})
    config = run_config({"task": "emmoe-012", "skills": {"mode": "physical", "models": {"rt-1-x": str(folder)}}})
    assert config.skills.models == {"RT-1-X": str(folder)} and config.dump()["skills"]["models"] == {"RT-1-X": str(folder)}
    assert "models" not in run_config({"task": "emmoe-012"}).dump()["skills"]  # runs without them dump as before


class _Replay:
    """A stand-in policy that gives a recorded episode's actions in order (SkillPolicy's inputs, reset and act)."""

    def __init__(self, frames: list[dict[str, np.ndarray]], size: int) -> None:
        from homiebot.skills.learned import PolicyInputs

        self.actions = [np.asarray(f["action"], dtype=float) for f in frames]
        self.states = [np.asarray(f["observation.state"]) for f in frames]
        self.inputs = PolicyInputs("replay", {"head": (3, size, size), "wrist": (3, size, size)}, 10, 6, 10, 1)
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []
        self.step = 0

    def reset(self) -> None:
        self.step = 0

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        assert set(images) == {"head", "wrist"} and all(i.shape == (32, 32, 3) for i in images.values())
        self.seen.append((np.asarray(state), np.asarray(env_state)))
        action = self.actions[min(self.step, len(self.actions) - 1)]
        self.step += 1
        return action


@pytest.fixture(scope="module")
def scripted_pick():  # type: ignore[no-untyped-def]
    """Seed 0's scripted Pick recorded as ``homie data skills`` records it (no LeRobot needed), and its simulator."""
    from homiebot.data.skill_datasets import SkillEpisodes

    episodes = SkillEpisodes("pick", size=32)
    record, frames = episodes.run(0)
    assert record.success and not record.base_moved and len(frames) > 50
    yield episodes, frames
    episodes.close()


def _serve_once(episodes, policy, budget: int, seed: int = 0):  # type: ignore[no-untyped-def]
    """The seed's placement and start again, then one Pick by ``policy`` in RT-1-X as the executor calls it."""
    from homiebot.skills.learned_skill import LearnedArmSkill
    from homiebot.skills.physical import PhysicalSkillSet

    learned = LearnedArmSkill("RT-1-X", None, policy=policy, step_budget=budget)
    plan, _spec = episodes.plan(seed)
    skills = PhysicalSkillSet(episodes.sim, seed=seed, learned={"RT-1-X": learned})
    episodes._start_pose(skills, plan, np.random.default_rng([seed, 20261130, 1]))
    try:
        return plan, skills, learned, skills.run(Action.PICK, "RT-1-X", plan.target)
    finally:
        learned.close()


@pytest.mark.slow
def test_the_scripted_picks_recorded_targets_replayed_through_the_slot_pick_the_object_again(scripted_pick) -> None:  # type: ignore[no-untyped-def]
    """The serving path's fidelity: the controllers' targets ``homie data skills`` records for a scripted Pick, sent back
    through the learned skill's command path (setpoint stream at 10 Hz, the grasp helper) from the same start, pick
    the object again, judged as a learned Pick is; the observations it is given are the recorded ones."""
    from homiebot.types import SkillStatus

    episodes, frames = scripted_pick
    replay = _Replay(frames, 32)
    plan, skills, learned, result = _serve_once(episodes, replay, len(frames) + 20)
    assert result.status is SkillStatus.SUCCESS, result.detail
    assert episodes.sim.state().held == plan.target and skills.driver.held() == plan.target
    assert learned.last is not None and learned.last.steps < len(frames)  # stopped once held and lifted
    # Observed as recorded: the joints at the first step, and the target's box (the environment state).
    first_state, first_env = replay.seen[0]
    np.testing.assert_allclose(first_state, frames[0]["observation.state"], atol=1e-3)
    np.testing.assert_allclose(first_env, frames[0]["observation.environment_state"], atol=1e-3)


@pytest.mark.slow
def test_where_the_scripted_pick_moves_the_base_first_the_learned_one_does_too(scripted_pick) -> None:  # type: ignore[no-untyped-def]
    """Seed 5's scripted Pick finds no grasp from the start pose and moves the base 0.38 m first; its recording starts
    after that move. The learned Pick takes the same stance (the scripted decision), then the policy: the replayed
    actions pick the object from there."""
    from homiebot.types import SkillStatus

    episodes, _frames = scripted_pick
    record, frames = episodes.run(5)
    assert record.success and record.base_moved
    _plan, _skills, _learned, result = _serve_once(episodes, _Replay(frames, 32), len(frames) + 20, seed=5)
    assert result.status is SkillStatus.SUCCESS, result.detail
    assert "(the base first moved" in result.detail and result.path_length > 0.3, result


@pytest.mark.slow
def test_an_arm_the_policy_drives_into_the_counter_stops_as_blocked(scripted_pick) -> None:  # type: ignore[no-untyped-def]
    """A failure the driver sees: the recorded reach, then the shoulder driven 0.6 rad down into the counter the
    object stands on: the joint stays off its target longer than the controller's grace time, and the Pick stops there
    with what blocked it (E1 after the executor's tries), before its budget."""
    from homiebot.data.skill_datasets import emmoe_code
    from homiebot.skills.learned_skill import JOINTS
    from homiebot.types import ErrorCode, SkillStatus

    episodes, frames = scripted_pick
    replay = _Replay(frames, 32)
    reach = 55  # the hand at the object, fingers open
    down = np.zeros(len(JOINTS))
    down[JOINTS.index("shoulder_lift")] = 0.6
    replay.actions = [*replay.actions[:reach], *(replay.actions[reach] + down * min(1.0, i / 10) for i in range(100))]
    _plan, _skills, learned, result = _serve_once(episodes, replay, 100)
    assert result.status is SkillStatus.EXECUTION_FAILED and emmoe_code(Action.PICK, result) is ErrorCode.E1
    assert "the arm stopped while the RT-1-X policy reached for" in result.detail, result.detail
    assert "shoulder_lift was" in result.detail and "(blocked: kitchen_counter" in result.detail, result.detail
    assert learned.last is not None and reach < learned.last.steps < 100


# ---------------------------------------------------------------------------------------------- with LeRobot

LEROBOT_REASON = "lerobot is not importable (lerobot[dataset,training]==0.6.1 needs Python >= 3.12: docs/skill-data.md)"


@pytest.mark.slow
@pytest.mark.parametrize(("cameras", "mark", "images"), [(None, False, ("head", "wrist")),
                                                         (("wrist",), True, ("wrist_marked",))],
                         ids=["head-wrist", "wrist-marked"])
def test_a_tiny_trained_policy_runs_one_pick_closed_loop_for_its_budget(tmp_path: Path, cameras, mark, images) -> None:  # type: ignore[no-untyped-def]
    """Both recipes: the two plain cameras, and the one wrist camera with the target marked (``--cameras wrist
    --mark-target``), each fed exactly the images its config names."""
    try:
        import lerobot.policies.act.modeling_act  # noqa: F401
    except ImportError:
        pytest.skip(LEROBOT_REASON)
    from homiebot.data.skill_datasets import EVAL_SEED_BASE, SkillEpisodes, emmoe_code, record_skill_dataset
    from homiebot.sim.mujoco.skill_observation import FPS
    from homiebot.skills.learned import SkillPolicy
    from homiebot.skills.learned_skill import LearnedArmSkill
    from homiebot.skills.physical import PhysicalSkillSet
    from homiebot.types import ErrorCode, SkillStatus

    data = tmp_path / "pick"
    record_skill_dataset("pick", 1, data, size=32, cameras=cameras, mark_target=mark)
    run = tmp_path / "run"
    done = CliRunner().invoke(build_app(), ["train", "skill", "--data", str(data), "--preset", "tiny", "--max-steps", "2",
                                            "--batch-size", "2", "--out", str(run)])
    assert done.exit_code == 0, done.output
    policy = run / "policy"
    inputs = check_skill_model("RT-1-X", policy)
    assert inputs.env_state_size == 6  # the target's box is among its inputs
    assert tuple(inputs.images) == images

    budget = 6
    learned = LearnedArmSkill("rt-1-x", policy, step_budget=budget)
    assert learned.cameras == images and learned.marks is mark
    fed: list[tuple[str, ...]] = []
    act = SkillPolicy.act

    def spied(self, given, state=None, env_state=None):  # type: ignore[no-untyped-def]
        fed.append(tuple(given))
        return act(self, given, state, env_state)

    learned.policy.act = spied.__get__(learned.policy)  # type: ignore[method-assign]
    episodes = SkillEpisodes("pick", size=32)
    try:
        seed = EVAL_SEED_BASE  # a held-out placement
        plan, _spec = episodes.plan(seed)
        skills = PhysicalSkillSet(episodes.sim, seed=seed, learned={"RT-1-X": learned})
        episodes._start_pose(skills, plan, np.random.default_rng([seed, 20261130, 1]))
        before = episodes.sim.state().robot
        result = skills.run(Action.PICK, "RT-1-X", plan.target)  # as the executor calls it, the planner's model
        log = learned.last
        assert log is not None and log.result == result
        assert result.status is SkillStatus.EXECUTION_FAILED and "RT-1-X policy" in result.detail, result.detail
        assert any(k in result.detail for k in ("grasp missed", "timed out", "arm stopped")), result.detail
        assert emmoe_code(Action.PICK, result) is ErrorCode.E1
        assert log.steps == budget and log.sim_seconds == pytest.approx(budget / FPS, abs=1e-6)
        assert fed == [images] * budget  # exactly the images the policy was trained on
        if "the base first" not in result.detail:  # the scripted Pick's stance decides whether it moves
            assert episodes.sim.state().robot == before
        assert skills.attempts[Action.PICK] == 1
        # Another model's Pick is the scripted one (no policy step).
        learned.last = None
        skills.run(Action.PICK, "octo", plan.target)
        assert learned.last is None
    finally:
        learned.close()
        episodes.close()
