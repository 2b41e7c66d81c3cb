# shellcheck shell=bash
# Source me: the environment in which the venv's python imports rclpy and the workspace overlay
# (homie_msgs, planner_node, executor_nodes, sim_bridge, homie_perception, homie) that
# scripts/setup_ros.sh built into install/.
#
#   source scripts/ros_env.sh
#
# Sets PYTHONPATH, AMENT_PREFIX_PATH, CMAKE_PREFIX_PATH, LD_LIBRARY_PATH, RMW_IMPLEMENTATION (when unset)
# and HOMIE_ROS_OVERLAY; with a system ROS 2 it also sources /opt/ros/<distro>/setup.bash. The variables
# are computed by homiebot.ros.environment (the same code `homie up` and `homie bag` use), from the
# .dsv files colcon writes for every package. Safe to source twice, under `set -euo pipefail`, and
# before the workspace was built (then it changes nothing).

_homie_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_homie_venv="${VENV:-.venv}"
case "$_homie_venv" in /*) ;; *) _homie_venv="$_homie_root/$_homie_venv" ;; esac

if [ -f "$_homie_root/install/.homie-ros-mode" ] && [ -x "$_homie_venv/bin/python" ]; then
  _homie_mode="$(cat "$_homie_root/install/.homie-ros-mode")"
  case "$_homie_mode" in
    system:*)
      _homie_system="${_homie_mode#system:}"
      case ":${AMENT_PREFIX_PATH-}:" in
        *":$_homie_system:"*) ;;  # already sourced
        *)
          # The distro's setup script reads unset variables; relax -u while sourcing it.
          case "$-" in *u*) _homie_had_u=1; set +u ;; *) _homie_had_u=0 ;; esac
          # shellcheck disable=SC1091
          source "$_homie_system/setup.bash"
          if [ "$_homie_had_u" = 1 ]; then set -u; fi
          ;;
      esac
      ;;
  esac
  # The guard keeps the wheels' bootstrapper from re-executing this one helper process.
  if _homie_exports="$(_ROS_WHEELS_BOOTSTRAP_COMPLETE=1 "$_homie_venv/bin/python" -m homiebot.ros.environment "$_homie_root/install")"; then
    eval "$_homie_exports"
  else
    eval "$_homie_exports"  # prints the reason on stderr; the environment is left as it was
  fi
fi
unset _homie_root _homie_venv _homie_mode _homie_system _homie_had_u _homie_exports
true
