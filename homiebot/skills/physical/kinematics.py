"""Inverse kinematics of a robot's arm on the robot's own model (its URDF), with mink.

:class:`ArmKinematics` loads the URDF a robot publishes on ``/robot_description`` (the embedded robot's is
:func:`homiebot.sim.mujoco.urdf.robot_urdf`) into MuJoCo, keeps the arm chain's joints (a robot profile's
``arm.joints``) and fixes every other joint, and adds the tool centre point (``tcp``) at an offset from the tip
link. Poses are in the URDF root's frame (``base_link``): a skill turns world targets into it with the base
pose. :meth:`ArmKinematics.solve` runs mink's differential IK (a QP per iteration, daqp) from several seeds and
keeps the first that converges, since a 7-joint arm's solution depends on where the iteration starts.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import mink
import mujoco
import numpy as np
from numpy.typing import ArrayLike

TCP_SITE = "tcp"
#: How many IK descents an ArmKinematics remembers (ArmKinematics._descend).
DESCENTS_KEPT = 4096


@dataclass(frozen=True)
class IKSolution:
    """Joint positions (in ``ArmKinematics.joints`` order) and the remaining error of the best attempt."""

    positions: tuple[float, ...]
    position_error: float  # m
    orientation_error: float  # rad
    converged: bool
    #: Not converged because ``acceptable`` refused every configuration that reached the target (a collision), not
    #: because the target is out of reach.
    refused: bool = False


class ArmKinematics:
    """The arm chain of a URDF, for IK (module docstring).

    Args:
        urdf: the robot description (URDF text).
        joints: the arm chain's joints, base to tip (a robot profile's ``arm.joints``).
        tip_link: the link the tool hangs from (``arm.tip_link``).
        tcp_offset: the tool centre point in the tip link's frame (m): where the fingers close.
    """

    def __init__(self, urdf: str, joints: Sequence[str], tip_link: str, tcp_offset: Sequence[float]) -> None:
        root = ET.fromstring(urdf)
        # Keep fixed links as bodies (the tip link is often attached by a fixed joint) and skip visuals.
        extension = ET.SubElement(root, "mujoco")
        ET.SubElement(extension, "compiler", fusestatic="false", discardvisual="true")
        spec = mujoco.MjSpec.from_string(ET.tostring(root, encoding="unicode"))
        tip = spec.body(tip_link)
        if tip is None:
            raise ValueError(f"the robot description has no link {tip_link!r}")
        tip.add_site(name=TCP_SITE, pos=list(tcp_offset))
        known = {j.name for j in spec.joints}
        missing = [j for j in joints if j not in known]
        if missing:
            raise ValueError(f"the robot description has no joints {missing}")
        for joint in list(spec.joints):
            if joint.name not in joints:
                spec.delete(joint)  # fixed at its zero position: no joint outside the chain moves the tool here
        self.model = spec.compile()
        self.joints = tuple(self.model.joint(i).name for i in range(self.model.njnt))
        if set(self.joints) != set(joints):
            raise ValueError(f"the arm chain {list(joints)} compiled to {list(self.joints)}")
        self._configuration = mink.Configuration(self.model)
        self._task = mink.FrameTask(TCP_SITE, "site", position_cost=1.0, orientation_cost=0.5)
        self._posture = mink.PostureTask(self.model, cost=1e-3)
        self._limits = [mink.ConfigurationLimit(self.model)]
        self._data = mujoco.MjData(self.model)
        # The bodies a chain joint moves (the joints' bodies and everything below them).
        moving = {int(self.model.jnt_bodyid[j]) for j in range(self.model.njnt)}
        for body in range(self.model.nbody):  # parents come first
            if self.model.body_parentid[body] in moving:
                moving.add(body)
        self._moving_bodies = sorted(moving)
        # The segments link_points samples: each moving body with its parent (when the parent moves too or a joint
        # sits at the body), parents first.
        segments = [(int(self.model.body_parentid[b]), b) for b in self._moving_bodies
                    if self.model.body_parentid[b] in moving or self.model.body_jntnum[b] > 0]
        self._segment_from = np.array([a for a, _ in segments], dtype=int)
        self._segment_to = np.array([b for _, b in segments], dtype=int)
        self._tcp = self.model.site(TCP_SITE).id
        # _descend's answers, by what they depend on.
        self._descents: dict[tuple[object, ...], tuple[tuple[float, ...], float, float, bool]] = {}
        # _link_points' layouts by the segments' step counts.
        self._layouts: dict[tuple[bytes, float], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        #: The link each of link_points' points lies on, by segment: a segment runs along its parent body's link
        #: (from that link's origin to its child's), and the tool centre is on the tip link.
        self.point_links: tuple[str, ...] = (*(self.model.body(a).name for a, _ in segments), tip_link)
        self.lower = self.model.jnt_range[:, 0].copy()
        self.upper = self.model.jnt_range[:, 1].copy()

    def vector(self, positions: Mapping[str, float]) -> np.ndarray:
        return np.array([positions[j] for j in self.joints], dtype=float)

    def forward(self, q: Sequence[float]) -> np.ndarray:
        """The tool's pose (4x4, base frame) at joint positions ``q``."""
        data = mujoco.MjData(self.model)
        data.qpos[:] = q
        mujoco.mj_kinematics(self.model, data)
        pose = np.eye(4)
        pose[:3, :3] = data.site_xmat[self._tcp].reshape(3, 3)
        pose[:3, 3] = data.site_xpos[self._tcp]
        return pose

    def link_points(self, q: Sequence[float], spacing: float = 0.05) -> np.ndarray:
        """Points along the moving links (every ``spacing`` m between each moving body's origin and its child's, and
        out to the tool centre), base frame: what a collision check of the arm against boxes tests."""
        return self.labelled_link_points(q, spacing)[0]

    def labelled_link_points(self, q: Sequence[float], spacing: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`link_points` and, for each point, the index in :attr:`point_links` of the link it lies on (a check
        may keep the hand closer to a wall than the thicker links behind it)."""
        data = self._data
        data.qpos[:] = q
        mujoco.mj_kinematics(self.model, data)
        return self._link_points(data.xpos, data.site_xpos[self._tcp], spacing)

    def _link_points(self, xpos: np.ndarray, tcp: np.ndarray, spacing: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`labelled_link_points` from the bodies' positions ``xpos`` and the tool centre ``tcp`` of one
        configuration."""
        # Vectorised (the motion planner calls this for every configuration it tests): segment i gets steps_i + 1
        # evenly spaced points, its two ends included, the segments in body order.
        a, b = xpos[self._segment_from], xpos[self._segment_to]
        # (A link exactly a whole number of spacings long gets that number, not one more from rounding.)
        steps = np.maximum(1, np.ceil(np.linalg.norm(b - a, axis=1) / spacing - 1e-9).astype(int))
        segment, fraction, labels = self._layout(steps, spacing)
        points = a[segment] + (b - a)[segment] * fraction
        return np.vstack([points, tcp]), labels

    def _layout(self, steps: np.ndarray, spacing: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which segment each of :meth:`_link_points`' points lies on and how far along it (a column), and the
        labels of all its points (the tool centre's last), for the segments' step counts ``steps``: they change
        only with the prismatic torso's lift, so they are kept rather than recomputed every call."""
        key = (steps.tobytes(), spacing)
        layout = self._layouts.get(key)
        if layout is None:
            segment = np.repeat(np.arange(len(steps)), steps + 1)
            starts = np.cumsum(steps + 1) - (steps + 1)
            fraction = (np.arange(len(segment)) - starts[segment]) / steps[segment]
            layout = (segment, fraction[:, None], np.append(segment, len(steps)))
            for array in layout:
                array.setflags(write=False)
            if len(self._layouts) < 64:
                self._layouts[key] = layout
        return layout

    def posed_points(self, qs: Sequence[Sequence[float]], tool: Sequence[np.ndarray] = (),
                     spacing: float = 0.05) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """What :meth:`labelled_link_points` and :meth:`tool_points` (of each of ``tool``'s point sets) give at each
        configuration of ``qs``, the same numbers, all configurations' together: the link points and their links,
        and each tool point set's points (one configuration's after another's). A collision check of a straight motion tests several
        configurations, each with the hand's outline and a held object's points: here from one forward-kinematics
        pass per configuration and one array computation for them all."""
        data, model = self._data, self.model
        count = len(qs)
        if count == 1:  # labelled_link_points and tool_points from one pass
            data.qpos[:] = qs[0]
            mujoco.mj_kinematics(model, data)
            points, labels = self._link_points(data.xpos, data.site_xpos[self._tcp], spacing)
            frame, origin = data.site_xmat[self._tcp].reshape(3, 3), data.site_xpos[self._tcp]
            return points, labels, [np.asarray(p, dtype=float) @ frame.T + origin for p in tool]
        xpos = np.empty((count, model.nbody, 3))
        tcp = np.empty((count, 3))
        frames = np.empty((count, 3, 3))
        for i, q in enumerate(qs):
            data.qpos[:] = q
            mujoco.mj_kinematics(model, data)
            xpos[i] = data.xpos
            tcp[i] = data.site_xpos[self._tcp]
            frames[i] = data.site_xmat[self._tcp].reshape(3, 3)
        a, b = xpos[:, self._segment_from], xpos[:, self._segment_to]
        steps = np.maximum(1, np.ceil(np.linalg.norm(b - a, axis=2) / spacing - 1e-9).astype(int))
        # The configurations by their segments' step counts (the torso's lift changes one along a motion), each
        # group's points computed at once: its configurations' in their order, the groups in the order they first
        # come (a check does not depend on the order of its points).
        groups: dict[bytes, list[int]] = {}
        for i, row in enumerate(steps):
            groups.setdefault(row.tobytes(), []).append(i)
        parts, part_labels = [], []
        for members in groups.values():
            segment, fraction, labels = self._layout(steps[members[0]], spacing)
            rows = members if len(members) < count else slice(None)
            a_, b_ = a[rows], b[rows]
            links = a_[:, segment] + (b_ - a_)[:, segment] * fraction
            parts.append(np.concatenate([links, tcp[rows][:, None]], axis=1).reshape(-1, 3))
            part_labels.append(np.tile(labels, len(members)))
        points = parts[0] if len(parts) == 1 else np.vstack(parts)
        labels = part_labels[0] if len(parts) == 1 else np.concatenate(part_labels)
        placed = [np.vstack([np.asarray(p, dtype=float) @ frames[i].T + tcp[i] for i in range(count)]) for p in tool]
        return points, labels, placed

    def tool_points(self, q: Sequence[float], points: np.ndarray) -> np.ndarray:
        """``points`` (N x 3, the tool's frame) in the base frame at joint positions ``q``: where something the
        tool holds rigidly (a grasped object) is."""
        data = self._data
        data.qpos[:] = q
        mujoco.mj_kinematics(self.model, data)
        return np.asarray(points, dtype=float) @ data.site_xmat[self._tcp].reshape(3, 3).T + data.site_xpos[self._tcp]

    def solve(
        self,
        target: np.ndarray,
        seeds: Sequence[ArrayLike],
        position_tolerance: float = 0.005,
        orientation_tolerance: float = 0.03,
        iterations: int = 150,
        acceptable: Callable[[tuple[float, ...]], bool] | None = None,
    ) -> IKSolution:
        """Joint positions that put the tool at ``target`` (4x4, base frame); the best attempt when none
        converges (``converged`` False: the pose is out of reach). ``acceptable`` rejects a converged solution
        (one in collision) and moves on to the next seed."""
        matrix = np.asarray(target, dtype=float)
        best: IKSolution | None = None
        refused = False
        for seed in seeds:
            positions, position_error, orientation_error, reached = self._descend(
                matrix, np.clip(np.asarray(seed, dtype=float), self.lower, self.upper), position_tolerance,
                orientation_tolerance, iterations)
            if reached:
                if acceptable is None or acceptable(positions):
                    return IKSolution(positions, position_error, orientation_error, True)
                refused = True
            if best is None or position_error < best.position_error:
                best = IKSolution(positions, position_error, orientation_error, False)
        assert best is not None, "solve needs at least one seed"
        return dataclasses.replace(best, refused=refused) if refused else best

    def _descend(self, target: np.ndarray, seed: np.ndarray, position_tolerance: float, orientation_tolerance: float,
                 iterations: int) -> tuple[tuple[float, ...], float, float, bool]:
        """mink's differential IK from ``seed`` towards ``target``: where it ended, its position and orientation
        errors, and whether it reached the tolerances (it stops there). A function of its arguments alone, so
        the answers are kept: a skill plans the same line or lift again from the same state (a Pick's plan before
        and after the base turned back, a retry after a failure), and every answer took up to ``iterations``
        QPs."""
        key = (target.tobytes(), seed.tobytes(), position_tolerance, orientation_tolerance, iterations)
        known = self._descents.get(key)
        if known is not None:
            return known
        configuration, task, posture = self._configuration, self._task, self._posture
        task.set_target(mink.SE3.from_matrix(target))
        configuration.update(seed)
        posture.set_target_from_configuration(configuration)
        reached = False
        for _ in range(iterations):
            velocity = mink.solve_ik(configuration, [task, posture], 0.05, "daqp", damping=1e-3, limits=self._limits)
            configuration.integrate_inplace(velocity, 0.05)
            error = task.compute_error(configuration)
            position_error, orientation_error = float(np.linalg.norm(error[:3])), float(np.linalg.norm(error[3:]))
            if position_error <= position_tolerance and orientation_error <= orientation_tolerance:
                reached = True
                break
        answer = (tuple(float(v) for v in configuration.q), position_error, orientation_error, reached)
        if len(self._descents) >= DESCENTS_KEPT:
            del self._descents[next(iter(self._descents))]  # the oldest
        self._descents[key] = answer
        return answer
