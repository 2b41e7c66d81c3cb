"""A learned Go to in a navigation slot (homiebot/skills/learned_goto.py; ``--skill-model NoMaD=DIR``, docs/skills.md).

The refusals need no LeRobot: a policy folder is checked from its ``config.json`` (stand-ins with LeRobot's layout,
tests/skills/test_learned_skill.py's). The serving tests record one scripted Go to as ``homie data skills`` does and
send its recorded velocities back through the slot (the command path's fidelity: the same observations, the goal
reached), drive a base into furniture and hold it still (the failures and their codes); the slow one trains a tiny ACT
on a one-episode Go to data set for two steps and serves it for one Go to on a held-out placement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.skills.learned_skill import LearnedSkillError, check_skill_model, serving
from homiebot.types import Action
from tests.skills.test_learned_skill import _one_error_line, _policy, _run


def _go_to_policy(root: Path, **kw: Any) -> Path:
    """A stand-in folder shaped like ``homie train skill``'s Go to policy (head and goal cameras, the goal pose, the
    base's velocity)."""
    args: dict[str, Any] = {"cameras": ("head", "goal"), "state": 3, "env": None, "action": 2, **kw}
    return _policy(root, **args)


def test_a_go_to_policy_fills_a_navigation_slot_and_serves_go_to_only(tmp_path: Path) -> None:
    folder = _go_to_policy(tmp_path / "p")
    for slot in ("NoMaD", "pixnav"):
        inputs = check_skill_model(slot, folder)
        assert set(inputs.images) == {"head", "goal"} and inputs.state_size == 3 and inputs.action_size == 2
    # A user's checkpoint with a subset of the inputs: the head camera alone, no state.
    assert set(check_skill_model("NoMaD", _go_to_policy(tmp_path / "q", cameras=("head",), state=None)).images) == {"head"}

    class Base:
        actions = frozenset({Action.GO_TO})

    learned = {"NoMaD": Base()}
    assert serving(learned, "nomad", Action.GO_TO) is learned["NoMaD"]  # type: ignore[arg-type, comparison-overlap]
    assert serving(learned, "PixNav", Action.GO_TO) is None  # another slot: scripted  # type: ignore[arg-type]
    assert serving(learned, "NoMaD", Action.PICK) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("slot", "make", "words"),
    [
        ("NoMaD", lambda t: _policy(t / "p"), ("outputs 10 values", "an arm policy", "base's velocity (linear_x, angular_z)")),
        ("PixNav", lambda t: _go_to_policy(t / "p", cameras=("head", "wrist")), ("camera(s) wrist", "head, goal")),
        ("NoMaD", lambda t: _go_to_policy(t / "p", cameras=()), ("takes no camera", "head, goal")),
        ("NoMaD", lambda t: _go_to_policy(t / "p", state=10), ("state of 10 values", "goal_x, goal_y, goal_yaw")),
        ("NoMaD", lambda t: _go_to_policy(t / "p", env=6), ("environment state of 6 values", "Go to has none")),
        ("PixNav", lambda t: _go_to_policy(t / "p", size=320), ("320 pixels a side", "at most 256")),
        ("NoMaD", lambda t: _go_to_policy(t / "p", action=3), ("outputs 3 values", "base's velocity")),
        ("RT-1-X", lambda t: _go_to_policy(t / "p"), ("outputs 2 values", "a Go to policy, for NoMaD or PixNav")),
    ],
)
def test_a_policy_that_cannot_serve_go_to_is_refused_in_one_line_before_any_episode(tmp_path: Path, slot, make, words) -> None:  # type: ignore[no-untyped-def]
    folder = make(tmp_path)
    with pytest.raises(LearnedSkillError) as err:
        check_skill_model(slot, folder)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert "\n" not in str(err.value)
    out = tmp_path / "record"
    done = _run("--out", str(out), "--skills", "physical", "--skill-model", f"{slot}={folder}")
    _one_error_line(done, "--skill-model", *words)
    assert not out.exists()


def test_homie_eval_refuses_a_mismatched_go_to_policy_too(tmp_path: Path) -> None:
    folder = _policy(tmp_path / "p")  # an arm policy
    done = CliRunner().invoke(build_app(), ["eval", "--out", str(tmp_path / "eval"), "--tasks", "emmoe-012",
                                            "--skills", "physical", "--skill-model", f"NoMaD={folder}"])
    _one_error_line(done, "--skill-model NoMaD", "outputs 10 values")
    assert not (tmp_path / "eval").exists()


# ---------------------------------------------------------------------------------------------- serving, in MuJoCo


class _Replay:
    """A stand-in policy that gives recorded actions in order (SkillPolicy's inputs, reset and act), and keeps what it
    was shown."""

    def __init__(self, actions: list[np.ndarray], size: int = 32) -> None:
        from homiebot.skills.learned import PolicyInputs

        self.actions = actions
        self.inputs = PolicyInputs("replay", {"head": (3, size, size), "goal": (3, size, size)}, 3, None, 2, 1)
        self.seen: list[tuple[dict[str, np.ndarray], np.ndarray]] = []
        self.step = 0

    def reset(self) -> None:
        self.step = 0

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        assert env_state is None and set(images) == {"head", "goal"}
        self.seen.append(({k: np.array(v) for k, v in images.items()}, np.asarray(state)))
        action = self.actions[min(self.step, len(self.actions) - 1)]
        self.step += 1
        return np.asarray(action, dtype=float)


@pytest.fixture(scope="module")
def scripted_go_to():  # type: ignore[no-untyped-def]
    """Seed 0's scripted Go to recorded as ``homie data skills`` records it (no LeRobot needed), and its simulator."""
    from homiebot.data.skill_datasets import SkillEpisodes

    episodes = SkillEpisodes("go_to", size=32)
    record, frames = episodes.run(0)
    assert record.success and record.base_moved and len(frames) > 30, record
    yield episodes, frames
    episodes.close()


def _serve_once(episodes, policy, budget: int, seed: int = 0):  # type: ignore[no-untyped-def]
    """The seed's placement and start again, then one Go to by ``policy`` in NoMaD as the executor calls it."""
    from homiebot.skills.learned_goto import LearnedGoTo
    from homiebot.skills.physical import PhysicalSkillSet

    learned = LearnedGoTo("NoMaD", None, policy=policy, step_budget=budget)
    plan, _spec = episodes.plan(seed)
    skills = PhysicalSkillSet(episodes.sim, seed=seed, learned={"NoMaD": learned})
    episodes._start_pose(skills, plan, np.random.default_rng([seed, 20261130, 1]))
    try:
        return plan, skills, learned, skills.run(Action.GO_TO, "NoMaD", plan.target)
    finally:
        learned.close()


def test_the_scripted_go_tos_recorded_velocities_replayed_through_the_slot_reach_its_goal(scripted_go_to) -> None:  # type: ignore[no-untyped-def]
    """The serving path's fidelity: the velocities ``homie data skills`` records for a scripted Go to, sent back as
    base velocity commands from the same start, bring the base to the same goal pose (within the goal checker's
    tolerance), and the policy is shown what the recorder wrote: the same head and goal images and goal pose."""
    from homiebot.data.skill_datasets import emmoe_code
    from homiebot.skills.learned_goto import XY_TOLERANCE, YAW_TOLERANCE
    from homiebot.types import ErrorCode, SkillStatus

    episodes, frames = scripted_go_to
    replay = _Replay([f["action"] for f in frames])
    plan, skills, learned, result = _serve_once(episodes, replay, len(frames) + 20)
    assert result.status is SkillStatus.SUCCESS, result.detail
    assert emmoe_code(Action.GO_TO, result) is ErrorCode.OK
    assert f"reached {plan.target}" in result.detail and "NoMaD policy" in result.detail, result.detail
    log = learned.last
    assert log is not None and 0 < log.steps <= len(frames) and result.path_length > 0.5
    end, goal = episodes.sim.state().robot, learned.goal
    assert goal is not None and end.distance_to(goal) <= XY_TOLERANCE
    assert abs(np.remainder(goal.yaw - end.yaw + np.pi, 2 * np.pi) - np.pi) <= YAW_TOLERANCE
    # The recorder's goal (the last frame's pose, where the goal pose in the base's frame is zero) is the served one.
    np.testing.assert_allclose(frames[-1]["observation.state"], 0.0, atol=1e-4)
    # Observed as recorded: the first frame's images and goal pose, and the goal image at every step.
    images, state = replay.seen[0]
    np.testing.assert_allclose(state, frames[0]["observation.state"], atol=1e-4)
    assert np.array_equal(images["head"], frames[0]["observation.images.head"])
    assert all(np.array_equal(seen["goal"], frames[0]["observation.images.goal"]) for seen, _ in replay.seen)
    # Simulated time: one period a step.
    assert log.sim_seconds == pytest.approx(log.steps / 10, abs=1e-6)


def test_a_base_the_policy_drives_into_furniture_stops_there_as_blocked(scripted_go_to) -> None:  # type: ignore[no-untyped-def]
    """Full speed ahead from the start pose (which faces a piece of furniture): the base stops before the contact, as a
    collision monitor stops it; held there for 1 s it counts as blocked, and the Go to fails with what it would have
    touched (E1 after the executor's tries). A command cut short once is not a failure: turning away goes on."""
    from homiebot.data.skill_datasets import emmoe_code
    from homiebot.skills.learned_goto import BLOCKED_STEPS
    from homiebot.types import ErrorCode, SkillStatus

    episodes, _frames = scripted_go_to
    ahead = np.array([0.6, 0.0])
    _plan, _skills, learned, result = _serve_once(episodes, _Replay([ahead]), 200)
    assert result.status is SkillStatus.EXECUTION_FAILED and emmoe_code(Action.GO_TO, result) is ErrorCode.E1
    assert "the NoMaD policy drove it into" in result.detail and "short of goal" in result.detail, result.detail
    log = learned.last
    assert log is not None and BLOCKED_STEPS <= log.steps < 200
    # Into the furniture until blocked but one step, then turning in place: no failure yet at the budget.
    touch = log.steps - BLOCKED_STEPS + 1
    actions = [ahead] * (touch + BLOCKED_STEPS - 2) + [np.array([0.0, 1.0])] * 10
    _plan, _skills, learned, result = _serve_once(episodes, _Replay(actions), len(actions))
    assert result.detail.startswith("timed out: the NoMaD policy"), result.detail


def test_a_policy_that_holds_the_base_still_short_of_the_goal_ends_the_go_to(scripted_go_to) -> None:  # type: ignore[no-untyped-def]
    from homiebot.skills.learned_goto import STILL_STEPS
    from homiebot.types import SkillStatus

    episodes, _frames = scripted_go_to
    _plan, _skills, learned, result = _serve_once(episodes, _Replay([np.zeros(2)]), 200)
    assert result.status is SkillStatus.EXECUTION_FAILED and "the NoMaD policy stopped the base" in result.detail, result
    assert learned.last is not None and learned.last.steps == STILL_STEPS
    _plan, _skills, learned, result = _serve_once(episodes, _Replay([np.array([0.0, 0.5])]), 5)  # turning in place
    assert result.status is SkillStatus.EXECUTION_FAILED and result.detail.startswith("timed out: the NoMaD policy")
    assert "budget of 5 steps" in result.detail and learned.last is not None and learned.last.steps == 5


# ---------------------------------------------------------------------------------------------- with LeRobot

LEROBOT_REASON = "lerobot is not importable (lerobot[dataset,training]==0.6.1 needs Python >= 3.12: docs/skill-data.md)"


@pytest.mark.slow
def test_a_tiny_trained_go_to_policy_runs_one_go_to_closed_loop(tmp_path: Path) -> None:
    try:
        import lerobot.policies.act.modeling_act  # noqa: F401
    except ImportError:
        pytest.skip(LEROBOT_REASON)
    from homiebot.data.skill_datasets import EVAL_SEED_BASE, SkillEpisodes, emmoe_code, record_skill_dataset
    from homiebot.sim.mujoco.skill_observation import FPS
    from homiebot.skills.learned_goto import LearnedGoTo
    from homiebot.skills.learned_skill import load_learned_skills
    from homiebot.skills.physical import PhysicalSkillSet
    from homiebot.types import ErrorCode, SkillStatus

    data = tmp_path / "go_to"
    record_skill_dataset("go_to", 1, data, size=32)
    run = tmp_path / "run"
    done = CliRunner().invoke(build_app(), ["train", "skill", "--data", str(data), "--preset", "tiny", "--max-steps", "2",
                                            "--batch-size", "2", "--out", str(run)])
    assert done.exit_code == 0, done.output
    policy = run / "policy"
    inputs = check_skill_model("NoMaD", policy)
    assert set(inputs.images) == {"head", "goal"} and inputs.state_size == 3 and inputs.action_size == 2
    assert isinstance(load_learned_skills({"pixnav": str(policy)})["PixNav"], LearnedGoTo)

    budget = 6
    learned = LearnedGoTo("nomad", policy, step_budget=budget)
    episodes = SkillEpisodes("go_to", size=32)
    try:
        seed = EVAL_SEED_BASE  # a held-out placement
        plan, _spec = episodes.plan(seed)
        skills = PhysicalSkillSet(episodes.sim, seed=seed, learned={"NoMaD": learned})
        episodes._start_pose(skills, plan, np.random.default_rng([seed, 20261130, 1]))
        result = skills.run(Action.GO_TO, "NoMaD", plan.target)  # as the executor calls it, the planner's model
        log = learned.last
        assert log is not None and log.result == result and 0 < log.steps <= budget
        assert "NoMaD policy" in result.detail, result.detail
        assert log.sim_seconds == pytest.approx(log.steps / FPS, abs=1e-6)
        if result.status is not SkillStatus.SUCCESS:  # two steps of training: it does not get there
            assert emmoe_code(Action.GO_TO, result) is ErrorCode.E1
        assert skills.attempts[Action.GO_TO] == 1
        # Another model's Go to is the scripted one (no policy step).
        learned.last = None
        skills.run(Action.GO_TO, "oracle", plan.target)
        assert learned.last is None
    finally:
        learned.close()
        episodes.close()
