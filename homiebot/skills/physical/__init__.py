"""Physical skills: EMMOE's Go to, Pick and Put through a robot's standard ROS 2 interfaces (docs/robots.md).

* :mod:`.navigation`: Go to as NavigateToPose goals, the goal poses from the world graph;
* :mod:`.kinematics`: inverse kinematics (mink) on the robot's URDF;
* :mod:`.manipulation`: Pick and Put as FollowJointTrajectory and GripperCommand goals, planned from the world
  graph's boxes;
* :mod:`.motion`: a sampling motion planner in the arm's joint space (RRT-Connect), for motions whose straight
  segments collide;
* :mod:`.skillset`: :class:`PhysicalSkillSet`, the executor's skill runner for ``--skills physical``.

All of them act through :class:`homiebot.sim.robot_driver.RobotDriver`.
"""

from homiebot.skills.physical.kinematics import ArmKinematics, IKSolution
from homiebot.skills.physical.manipulation import ArmSetup, PhysicalManipulation, sim_arm_setup
from homiebot.skills.physical.navigation import approach_poses, go_to
from homiebot.skills.physical.skillset import PHYSICAL_ACTIONS, PhysicalSkillSet

__all__ = [
    "PHYSICAL_ACTIONS",
    "ArmKinematics",
    "ArmSetup",
    "IKSolution",
    "PhysicalManipulation",
    "PhysicalSkillSet",
    "approach_poses",
    "go_to",
    "sim_arm_setup",
]
