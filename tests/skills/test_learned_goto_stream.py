"""A learned Go to over a robot's interfaces (homiebot/skills/learned_goto.py: ``run_base_policy``, ``stopped_short``,
``goal_pose``, ``go_to_result``), the loop the ROS graph's policy node runs (homiebot/ros/policy_goto.py; docs/skills.md,
"A Go to policy in the graph"): judged from what the robot reports (its camera and odometry), never from the
simulator's collision check.

The first tests drive a plane with one wall (a stand-in robot, plain Python); the last ones drive the embedded
simulator through a stream that does what the sim bridge does for ``/cmd_vel`` and the goal photo, and compare with the
in-process slot (tests/skills/test_learned_goto.py's recorded Go to): the same observations, steps and message.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from homiebot.skills.learned_goto import (
    BLOCKED_STEPS,
    STILL_STEPS,
    BaseFrame,
    BaseLimits,
    run_base_policy,
    stopped_short,
)
from homiebot.types import Pose2D
from tests.skills.test_learned_goto import _Replay, _serve_once


def test_a_command_counts_as_stopped_short_only_when_the_base_covered_less_than_it_asked_for() -> None:
    start = Pose2D(1.0, 2.0, 0.5)
    ahead = Pose2D(1.0 + 0.06 * math.cos(0.5), 2.0 + 0.06 * math.sin(0.5), 0.5)
    assert not stopped_short(0.6, 0.0, 0.1, start, ahead)  # all the way
    assert stopped_short(0.6, 0.0, 0.1, start, Pose2D(1.03 * math.cos(0.0) + 0.0, 2.0, 0.5))  # half of it
    assert stopped_short(0.6, 0.0, 0.1, start, start)  # none
    assert not stopped_short(2.0, 0.0, 0.1, start, ahead)  # clamped to the base's 0.6 m/s: all it could
    # A turn on the spot: the heading must change by the command's angle (clamped to 1 rad/s).
    assert not stopped_short(0.0, 1.0, 0.1, start, Pose2D(1.0, 2.0, 0.6))
    assert not stopped_short(0.0, 3.0, 0.1, start, Pose2D(1.0, 2.0, 0.6))
    assert stopped_short(0.0, 1.0, 0.1, start, Pose2D(1.0, 2.0, 0.52))
    # An arc: its chord, a little shorter than the arc.
    v, w, t = 0.5, 1.0, 0.1
    chord = 2 * v / w * math.sin(w * t / 2)
    arc_end = Pose2D(start.x + chord * math.cos(0.5 + w * t / 2), start.y + chord * math.sin(0.5 + w * t / 2), 0.6)
    assert not stopped_short(v, w, t, start, arc_end)
    # Holding still, or a command too small to check, is never short.
    assert not stopped_short(0.0, 0.0, 0.1, start, start)
    assert not stopped_short(0.0005, 0.0, 0.1, start, start)


class _Plane:
    """A base on a plane with a wall at x = ``wall``: a twist moves it on its arc for the period, unless the arc's end
    would cross the wall (the base then stays: a collision monitor's stop). Its head camera is a constant image."""

    def __init__(self, start: Pose2D, wall: float = 10.0) -> None:
        self.pose, self.wall, self.clock, self.sent = start, wall, 0.0, 0
        self.goal_asked: Pose2D | None = None
        #: What the base was told, in order: the twists and the stops (``None``).
        self.told: list[tuple[float, float] | None] = []

    def _frame(self) -> BaseFrame:
        return BaseFrame(self.clock, {"head": np.zeros((8, 8, 3), np.uint8)}, self.pose)

    def start(self, goal: Pose2D):  # type: ignore[no-untyped-def]
        self.goal_asked = goal
        return np.full((8, 8, 3), 7, np.uint8), self._frame()

    def stop(self) -> None:
        self.told.append(None)

    def send(self, linear_x: float, angular_z: float, seconds: float) -> BaseFrame:
        self.sent += 1
        self.told.append((linear_x, angular_z))
        v, w = float(np.clip(linear_x, -0.6, 0.6)), float(np.clip(angular_z, -1.0, 1.0))
        mid = self.pose.yaw + w * seconds / 2
        ahead = Pose2D(self.pose.x + v * seconds * math.cos(mid), self.pose.y + v * seconds * math.sin(mid),
                       self.pose.yaw + w * seconds)
        if ahead.x < self.wall:
            self.pose = ahead
        self.clock += seconds
        return self._frame()


class _Steer:
    """A policy that steers to ``goal`` (the goal pose in the base's frame, its state), and keeps what it saw."""

    inputs = None

    def __init__(self) -> None:
        self.seen: list[tuple[set[str], np.ndarray]] = []

    def reset(self) -> None:
        self.seen.clear()

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        self.seen.append((set(images), np.array(state)))
        x, y, yaw = (float(v) for v in state)
        if math.hypot(x, y) > 0.1:
            bearing = math.atan2(y, x)
            return np.array([0.6 if abs(bearing) < 0.3 else 0.0, float(np.clip(2 * bearing, -1, 1))])
        return np.array([0.0, float(np.clip(2 * yaw, -1, 1))])


def test_the_loop_brings_a_steered_base_to_its_goal_and_sees_what_the_policy_takes() -> None:
    plane, policy = _Plane(Pose2D(0.0, 0.0, 0.0)), _Steer()
    goal = Pose2D(2.0, 1.0, 1.5)
    outcome = run_base_policy(policy, plane, ("head", "goal"), goal, True, BaseLimits(step_budget=200))
    assert outcome.kind == "" and plane.goal_asked == goal, outcome
    assert outcome.end is not None and math.hypot(outcome.end.x - 2.0, outcome.end.y - 1.0) <= 0.25
    assert outcome.steps == plane.sent == len(policy.seen) < 200
    assert outcome.seconds == pytest.approx(outcome.steps / 10)
    assert outcome.travelled == pytest.approx(math.hypot(2.0, 1.0), rel=0.2)
    assert policy.seen[0][0] == {"head", "goal"}
    np.testing.assert_allclose(policy.seen[0][1], [2.0, 1.0, 1.5], atol=1e-6)  # the goal in the base's frame
    # A policy that takes the goal image only is shown no head image, and one without a state gets None.
    seen: list[tuple[set[str], object]] = []

    class OnlyGoal:
        def reset(self) -> None: ...

        def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
            seen.append((set(images), state))
            return np.zeros(2)

    run_base_policy(OnlyGoal(), _Plane(Pose2D(0, 0, 0)), ("goal",), goal, False, BaseLimits(step_budget=3))
    assert seen[0] == ({"goal"}, None)


def test_a_base_held_at_a_wall_is_blocked_after_ten_short_commands_and_one_cut_is_not_a_failure() -> None:
    goal = Pose2D(3.0, 0.0, 0.0)
    plane = _Plane(Pose2D(0.0, 0.0, 0.0), wall=0.5)
    outcome = run_base_policy(_Replay([np.array([0.6, 0.0])]), plane, ("head", "goal"), goal, True, BaseLimits(step_budget=100))
    touch = 8  # 0.06 m a period: the ninth would cross 0.5
    assert outcome.kind == "blocked" and outcome.steps == touch + BLOCKED_STEPS, outcome
    assert outcome.end is not None and outcome.end.x == pytest.approx(0.48)
    # Into the wall for one step short of blocked, then turning away: no failure until the budget.
    actions = [np.array([0.6, 0.0])] * (touch + BLOCKED_STEPS - 1) + [np.array([0.0, 1.0])] * 10
    outcome = run_base_policy(_Replay(actions), _Plane(Pose2D(0, 0, 0), wall=0.5), ("head", "goal"), goal, True,
                              BaseLimits(step_budget=len(actions)))
    assert outcome.kind == "budget" and outcome.steps == len(actions), outcome


def test_a_base_held_still_ends_the_loop_and_the_budget_ends_it_too() -> None:
    goal = Pose2D(3.0, 0.0, 0.0)
    outcome = run_base_policy(_Replay([np.zeros(2)]), _Plane(Pose2D(0, 0, 0)), ("head", "goal"), goal, True)
    assert outcome.kind == "still" and outcome.steps == STILL_STEPS
    outcome = run_base_policy(_Replay([np.array([0.0, 0.5])]), _Plane(Pose2D(0, 0, 0)), ("head", "goal"), goal, True,
                              BaseLimits(step_budget=5))
    assert outcome.kind == "budget" and outcome.steps == 5
    # Already there: no step at all.
    outcome = run_base_policy(_Replay([np.zeros(2)]), _Plane(Pose2D(2.9, 0.1, 0.1)), ("head", "goal"), goal, True)
    assert outcome.kind == "" and outcome.steps == 0


def _ends_with_one_stop(plane: _Plane) -> None:
    assert plane.told and plane.told[-1] is None and plane.told.count(None) == 1, plane.told


def test_every_run_ends_with_exactly_one_stop_however_it_ends(caplog) -> None:  # type: ignore[no-untyped-def]
    """A base controller holds the last twist: the loop stops the base once at the end of every run, arrived, blocked,
    still, out of budget, cancelled, already there, or raising (the policy's error, the robot's silence)."""
    from homiebot.skills.learned import SkillPolicyError

    goal = Pose2D(3.0, 0.0, 0.0)
    ends = {
        "": (_Steer(), _Plane(Pose2D(0.0, 0.0, 0.0)), Pose2D(2.0, 1.0, 1.5)),
        "blocked": (_Replay([np.array([0.6, 0.0])]), _Plane(Pose2D(0.0, 0.0, 0.0), wall=0.5), goal),
        "still": (_Replay([np.zeros(2)]), _Plane(Pose2D(0.0, 0.0, 0.0)), goal),
        "budget": (_Replay([np.array([0.0, 0.5])]), _Plane(Pose2D(0.0, 0.0, 0.0)), goal),
    }
    for kind, (policy, plane, to) in ends.items():
        outcome = run_base_policy(policy, plane, ("head", "goal"), to, True, BaseLimits(step_budget=100))
        assert outcome.kind == kind and outcome.steps == plane.sent > 0, (kind, outcome)
        _ends_with_one_stop(plane)
    there = _Plane(Pose2D(2.9, 0.1, 0.1))
    assert run_base_policy(_Replay([np.zeros(2)]), there, ("head", "goal"), goal, True).steps == 0
    assert there.told == [None]

    # Cancelled before the fourth step: three twists, then the stop; the outcome says where the base stopped.
    plane, asked = _Plane(Pose2D(0.0, 0.0, 0.0)), []
    outcome = run_base_policy(_Replay([np.array([0.5, 0.0])]), plane, ("head", "goal"), goal, True,
                              cancelled=lambda: asked.append(1) or len(asked) > 3)
    assert outcome.kind == "cancelled" and outcome.steps == 3 and plane.told[:3] == [(0.5, 0.0)] * 3, outcome
    assert outcome.end == plane.pose and outcome.end.x == pytest.approx(0.15)
    _ends_with_one_stop(plane)

    class Failing(_Replay):
        def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
            if self.step == 2:
                raise SkillPolicyError("the checkpoint's action has 3 values; the base takes 2")
            return super().act(images, state, env_state)

    plane = _Plane(Pose2D(0.0, 0.0, 0.0))
    with pytest.raises(SkillPolicyError, match="3 values"):
        run_base_policy(Failing([np.array([0.5, 0.0])]), plane, ("head", "goal"), goal, True)
    assert plane.told == [(0.5, 0.0), (0.5, 0.0), None]

    class Silent(_Plane):
        def send(self, linear_x: float, angular_z: float, seconds: float) -> BaseFrame:
            super().send(linear_x, angular_z, seconds)
            raise TimeoutError("no frame stamped after 0.050 s within 10.0 s")  # the graph's CallTimeout is one

    plane = Silent(Pose2D(0.0, 0.0, 0.0))
    with pytest.raises(TimeoutError):
        run_base_policy(_Replay([np.array([0.5, 0.0])]), plane, ("head", "goal"), goal, True)
    assert plane.told == [(0.5, 0.0), None]

    # A stop that cannot go out is said in the log and hides neither the outcome nor the run's own error.
    class Unstoppable(_Plane):
        def stop(self) -> None:
            raise RuntimeError("publisher's context is invalid")

    outcome = run_base_policy(_Replay([np.zeros(2)]), Unstoppable(Pose2D(0.0, 0.0, 0.0)), ("head", "goal"), goal, True)
    assert outcome.kind == "still"
    assert "could not be told to stop" in caplog.text and "context is invalid" in caplog.text


def test_a_cancelled_go_to_says_where_the_base_stopped() -> None:
    from homiebot.skills.learned_goto import go_to_result
    from homiebot.types import SkillStatus, WorldState

    result = go_to_result("NoMaD", WorldState(Pose2D(1.0, 0.0, 0.5), 0.3, None), "fridge", Pose2D(3.0, 0.0, 0.0), "cancelled", Pose2D(1.0, 0.0, 0.5),
                          12, 1.2, 1.0, 600)
    assert result.status is SkillStatus.EXECUTION_FAILED and result.path_length == 1.0
    assert result.detail == ("cancelled: the NoMaD policy's Go to fridge was stopped 2.00 m and 0.50 rad from goal "
                             "(3.00, 0.00) (12 policy steps, 1.2 s)"), result.detail


# ---------------------------------------------------------------------------------------------- on the simulator


class _SimStream:
    """The sim bridge's side of ``/cmd_vel`` and the goal photo, in one process (ros2_ws/src/sim_bridge: the goal
    photo is the head camera with the base at the goal, the base put back; a twist is ``base_velocity`` for one
    period, what the base touched at the run's first twist tolerated until it leaves it; a frame is the head camera
    at the base's pose)."""

    def __init__(self, sim, size: int = 32) -> None:  # type: ignore[no-untyped-def]
        from homiebot.sim.mujoco.skill_cameras import SkillCameras
        from homiebot.sim.mujoco.skill_observation import base_qpos

        self.sim = sim
        compiled, self.data = sim.physics_handles()
        self.model = compiled.model
        self.cameras = SkillCameras(self.model, size)
        self.base = base_qpos(self.model)
        self.tolerated: str | None = None
        self.first = True

    def _frame(self) -> BaseFrame:
        from homiebot.sim.mujoco.skill_observation import head_at

        pose = self.sim.base_pose()
        return BaseFrame(self.sim.sim_time, {"head": head_at(self.cameras, self.model, self.data, self.base, pose)},
                         pose)

    def start(self, goal: Pose2D):  # type: ignore[no-untyped-def]
        import mujoco

        from homiebot.sim.mujoco.skill_observation import head_at

        here = self.sim.base_pose()
        photo = head_at(self.cameras, self.model, self.data, self.base, goal)
        self.data.qpos[self.base] = (here.x, here.y, here.yaw)
        mujoco.mj_forward(self.model, self.data)
        return photo, self._frame()

    def stop(self) -> None:
        self.first, self.tolerated = True, None  # the bridge's stop: the run ends, nothing moves, no time passes

    def send(self, linear_x: float, angular_z: float, seconds: float) -> BaseFrame:
        if self.first:
            self.tolerated, self.first = self.sim.base_contact(), False
        self.sim.base_velocity(linear_x, angular_z, seconds, self.tolerated)
        if self.tolerated is not None and self.sim.base_contact() != self.tolerated:
            self.tolerated = None
        return self._frame()

    def close(self) -> None:
        self.cameras.close()


@pytest.fixture(scope="module")
def scripted_go_to():  # type: ignore[no-untyped-def]
    from homiebot.data.skill_datasets import SkillEpisodes

    episodes = SkillEpisodes("go_to", size=32)
    record, frames = episodes.run(0)
    assert record.success and record.base_moved and len(frames) > 30, record
    yield episodes, frames
    episodes.close()


def _over_the_stream(episodes, actions, budget: int):  # type: ignore[no-untyped-def]
    """From the seed's start again, one Go to by the replayed ``actions`` through the stream loop, as the graph's
    policy node runs it (InterfaceGoTo: the goal pose from the world graph, the loop, the in-process messages)."""
    from homiebot.skills.learned_goto import go_to_result, goal_pose
    from homiebot.skills.physical import PhysicalSkillSet

    plan, _spec = episodes.plan(0)
    skills = PhysicalSkillSet(episodes.sim, seed=0)
    episodes._start_pose(skills, plan, np.random.default_rng([0, 20261130, 1]))
    world = skills.world()
    goal = goal_pose(world, plan.target)
    assert isinstance(goal, Pose2D)
    stream, replay = _SimStream(episodes.sim), _Replay(actions)
    try:
        outcome = run_base_policy(replay, stream, ("head", "goal"), goal, True, BaseLimits(step_budget=budget))
    finally:
        stream.close()
    assert outcome.end is not None
    result = go_to_result("NoMaD", world, plan.target, goal, outcome.kind, outcome.end, outcome.steps, outcome.seconds,
                          outcome.travelled, budget)
    return goal, replay, outcome, result


def test_the_stream_loop_replays_a_recorded_go_to_as_the_in_process_slot_does(scripted_go_to) -> None:  # type: ignore[no-untyped-def]
    episodes, frames = scripted_go_to
    actions = [f["action"] for f in frames]
    _plan, _skills, learned, in_process = _serve_once(episodes, _Replay(actions), len(frames) + 20)
    assert in_process.success, in_process.detail
    goal, replay, outcome, result = _over_the_stream(episodes, actions, len(frames) + 20)
    assert goal == learned.goal  # the first pose has a path here: the same goal without ComputePathToPose
    assert outcome.kind == "" and result.detail == in_process.detail, (result.detail, in_process.detail)
    assert result.path_length == pytest.approx(in_process.path_length, rel=0.02)
    images, state = replay.seen[0]
    assert np.array_equal(images["head"], frames[0]["observation.images.head"])
    assert all(np.array_equal(seen["goal"], frames[0]["observation.images.goal"]) for seen, _ in replay.seen)
    np.testing.assert_allclose(state, frames[0]["observation.state"], atol=1e-4)


def test_odometry_finds_the_base_blocked_at_the_step_the_collision_check_does(scripted_go_to) -> None:  # type: ignore[no-untyped-def]
    episodes, _frames = scripted_go_to
    ahead = [np.array([0.6, 0.0])]
    _plan, _skills, learned, in_process = _serve_once(episodes, _Replay(ahead), 200)
    assert learned.last is not None and "drove it into" in in_process.detail
    _goal, _replay, outcome, result = _over_the_stream(episodes, ahead, 200)
    assert outcome.kind == "blocked" and outcome.steps == learned.last.steps, (outcome, learned.last)
    # The robot does not say what it would have touched; the rest of the message is the in-process one.
    assert "drove it against something that stopped it short" in result.detail, result.detail
    assert result.detail.split(" at (")[1] == in_process.detail.split(" at (")[1]
