"""The policy node's closed loop (homiebot/skills/learned_stream.py) on a stand-in robot: it stops on what the joints
show (fingers closed on something and the tool raised, an arm joint held off its target, the budget) and observes as
``homie data skills`` records (the joints in order, the target's box in the base's frame). No simulator, no ROS."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from homiebot.sim.mujoco.skill_observation import JOINTS, target_state
from homiebot.skills.learned_stream import ArmFrame, StreamLimits, run_policy
from homiebot.types import Pose2D

BASE = Pose2D(1.0, 2.0, 0.5)


class Robot:
    """Joints that follow their targets, except where told: ``stuck`` joints stay put, and fingers commanded below
    ``object_gap`` stop there (an object between them)."""

    def __init__(self, stuck: tuple[str, ...] = (), object_gap: float = 0.0) -> None:
        self.joints = dict.fromkeys(JOINTS, 0.0)
        self.joints.update(finger_left=0.04, finger_right=0.04)
        self.stuck, self.object_gap = stuck, object_gap
        self.stamp = 5.0
        self.sent: list[tuple[dict[str, float], float]] = []

    def frame(self) -> ArmFrame:
        image = np.zeros((8, 8, 3), dtype=np.uint8)
        return ArmFrame(self.stamp, {"head": image, "wrist": image}, dict(self.joints), BASE)

    def start(self) -> ArmFrame:
        return self.frame()

    def send(self, positions: Mapping[str, float], seconds: float) -> ArmFrame:
        self.sent.append((dict(positions), seconds))
        for joint, value in positions.items():
            if joint not in self.stuck:
                self.joints[joint] = value
        if positions["finger_left"] + positions["finger_right"] < self.object_gap:
            self.joints.update(finger_left=self.object_gap / 2, finger_right=self.object_gap / 2)
        self.stamp += seconds
        return self.frame()


class Policy:
    """Closes the fingers, then raises the torso 2 cm a step (or whatever ``plan`` says)."""

    def __init__(self, plan=None) -> None:  # type: ignore[no-untyped-def]
        self.calls: list[tuple[np.ndarray, np.ndarray | None]] = []
        self.plan = plan or (lambda step: {"finger_left": 0.0, "finger_right": 0.0, "torso_lift": 0.02 * step})
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        assert set(images) == {"head", "wrist"}
        self.calls.append((np.asarray(state), env_state))
        action = dict.fromkeys(JOINTS, 0.0)
        action.update(self.plan(len(self.calls)))
        return np.array([action[j] for j in JOINTS])


def _torso(joints: Mapping[str, float]) -> float:
    return joints["torso_lift"]


BOX = ((2.0, 2.0, 0.8), (2.1, 2.2, 0.9))


def test_a_grasp_raised_by_the_lift_stops_the_loop_lifted() -> None:
    robot, policy = Robot(object_gap=0.05), Policy()
    outcome = run_policy(policy, robot, ("head", "wrist"), BOX, _torso, StreamLimits(step_budget=50))
    assert outcome.kind == "lifted" and outcome.grasping
    # closed on the object at step 1 (still moving then: 3 cm in the period), stopped by it at step 2 (torso 0.04),
    # raised 6 cm at step 5 (4 cm at step 4: not yet)
    assert outcome.steps == 5 and outcome.raised == pytest.approx(0.06)
    assert outcome.seconds == pytest.approx(0.5) and policy.resets == 1
    assert all(seconds == pytest.approx(0.1) for _, seconds in robot.sent)
    state, env = policy.calls[0]
    expected = dict.fromkeys(JOINTS, 0.0) | {"finger_left": 0.04, "finger_right": 0.04}  # the joints before the first step
    np.testing.assert_allclose(state, [expected[j] for j in JOINTS])
    np.testing.assert_allclose(env, target_state(*BOX, BASE.x, BASE.y, BASE.yaw))


def test_fingers_closed_on_nothing_are_no_grasp_and_the_budget_ends_the_loop() -> None:
    robot, policy = Robot(object_gap=0.0), Policy()
    outcome = run_policy(policy, robot, ("head", "wrist"), None, _torso, StreamLimits(step_budget=8))
    assert outcome.kind == "budget" and not outcome.grasping and outcome.steps == 8
    assert policy.calls[0][1] is None  # no target box for a policy that takes none


def test_fingers_still_closing_on_a_narrower_target_are_no_grasp() -> None:
    """An untrained policy's gap jumps every period and the fingers trail it: wider than the command while they move
    is no grasp, however high the tool goes (before the fingers' speed was checked, this ended ``lifted`` and the
    Pick said the object had slipped out of a hand that never held it)."""

    class SlowFingers(Robot):
        def send(self, positions, seconds):  # type: ignore[no-untyped-def]
            start = {f: self.joints[f] for f in ("finger_left", "finger_right")}
            frame = super().send(positions, seconds)
            for finger, was in start.items():  # 5 mm a period each towards the target: 1 cm of gap
                self.joints[finger] = max(positions[finger], was - 0.005)
            return ArmFrame(frame.stamp, frame.images, dict(self.joints), frame.base)

    robot, policy = SlowFingers(), Policy(lambda step: {"finger_left": 0.0, "finger_right": 0.0, "torso_lift": 0.1 * step})
    outcome = run_policy(policy, robot, ("head", "wrist"), None, _torso, StreamLimits(step_budget=6))
    assert outcome.kind == "budget" and not outcome.grasping and outcome.steps == 6


def test_a_joint_held_off_its_target_stops_the_loop_as_blocked() -> None:
    robot = Robot(stuck=("shoulder_lift",))
    policy = Policy(lambda step: {"shoulder_lift": 0.5, "finger_left": 0.04, "finger_right": 0.04})
    limits = StreamLimits(step_budget=50)
    outcome = run_policy(policy, robot, ("head", "wrist"), None, _torso, limits)
    assert outcome.kind == "blocked" and "shoulder_lift was 0.50 from its target" in outcome.detail
    assert outcome.steps == round(limits.blocked_after * 10)  # the controller's grace time, in periods


def test_a_joint_far_from_a_jumped_target_but_still_moving_is_not_blocked() -> None:
    """An untrained policy's targets jump; the joint moving towards one is not stopped by anything."""

    class Slow(Robot):
        def send(self, positions, seconds):  # type: ignore[no-untyped-def]
            start = self.joints["shoulder_lift"]
            frame = super().send(positions, seconds)
            self.joints["shoulder_lift"] = start + 0.1  # 1 rad/s towards the target
            return ArmFrame(frame.stamp, frame.images, dict(self.joints), frame.base)

    policy = Policy(lambda step: {"shoulder_lift": 1.5, "finger_left": 0.04, "finger_right": 0.04})
    outcome = run_policy(policy, Slow(), ("head", "wrist"), None, _torso, StreamLimits(step_budget=10))
    assert outcome.kind == "budget", outcome.detail
