"""The process environment in which Python imports rclpy and the workspace overlay built by setup_ros.sh.

``scripts/setup_ros.sh`` builds ``homie_msgs`` and the node packages with colcon into ``install/``; colcon
describes what each package adds to the environment in its ``share/<pkg>/package.dsv`` files (colcon's
own data format: ``prepend-non-duplicate;VAR;subpath`` and ``source;other.dsv`` lines). This module reads
those files, so ``scripts/ros_env.sh``, ``homie up`` and ``homie bag`` compute the same variables from one
place. Reading the ``.dsv`` files ourselves (instead of sourcing colcon's ``setup.bash``) keeps a shell out
of the path of a Python program, and works under ``set -u`` where the generated scripts do not.

Two ROS 2 sources are supported (``install/.homie-ros-mode`` records which one built the overlay):

* ``wheels``: ROS 2 Jazzy from PyPI inside the venv. The libraries lie in ``<venv>/lib`` and
  ``site-packages/ros_*.libs``; the wheels' ``ros_wheels_bootstrapper`` would re-execute every Python
  process to add them to ``LD_LIBRARY_PATH``, so we add them and mark the bootstrap as done.
* ``system:/opt/ros/<distro>``: the distro's ``setup.bash`` is sourced in a child bash and its
  environment is read back (when the caller has not sourced it already).

Nothing here imports rclpy: this module is what makes rclpy importable.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

MODE_FILE = ".homie-ros-mode"
#: Set in an environment that already carries the overlay (value: the install folder).
OVERLAY_MARKER = "HOMIE_ROS_OVERLAY"
#: The guard variable of the PyPI wheels' bootstrapper (ros_wheels_bootstrapper/__init__.py).
WHEELS_BOOTSTRAP_GUARD = "_ROS_WHEELS_BOOTSTRAP_COMPLETE"
#: Variables this module may change; everything else is passed through untouched.
PATH_VARIABLES = ("AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PATH")


class RosEnvironmentError(RuntimeError):
    """The overlay is missing or cannot be made importable; the message says what to run."""


@dataclass(frozen=True)
class Overlay:
    install_dir: Path
    mode: str  # "wheels" or "system:<prefix>"

    @property
    def system_prefix(self) -> Path | None:
        return Path(self.mode.split(":", 1)[1]) if self.mode.startswith("system:") else None


def repository_root() -> Path:
    """The checkout that holds this package (``homiebot/ros/environment.py`` -> repository root)."""
    return Path(__file__).resolve().parents[2]


def find_overlay(install_dir: str | os.PathLike[str] | None = None) -> Overlay:
    """Locate the built overlay: ``install_dir``, else ``$HOMIE_ROS_OVERLAY``, else ``<repository>/install``."""
    candidate = Path(install_dir or os.environ.get(OVERLAY_MARKER) or repository_root() / "install")
    mode_file = candidate / MODE_FILE
    if not mode_file.is_file():
        raise RosEnvironmentError(
            f"no ROS 2 overlay at {candidate} (missing {MODE_FILE}): run scripts/setup_ros.sh first"
        )
    return Overlay(candidate.resolve(), mode_file.read_text().strip())


def _prepend(env: dict[str, str], name: str, value: str) -> None:
    parts = [p for p in env.get(name, "").split(os.pathsep) if p]
    if value in parts:
        return
    env[name] = os.pathsep.join([value, *parts])


def _append(env: dict[str, str], name: str, value: str) -> None:
    parts = [p for p in env.get(name, "").split(os.pathsep) if p]
    if value in parts:
        return
    env[name] = os.pathsep.join([*parts, value])


def _apply_dsv(env: dict[str, str], prefix: Path, dsv: Path, seen: set[Path]) -> None:
    """Apply one colcon ``.dsv`` file (and the ``.dsv`` files it sources) relative to ``prefix``."""
    if dsv in seen or not dsv.is_file():
        return
    seen.add(dsv)
    for raw_line in dsv.read_text().splitlines():
        line = raw_line.strip()
        if not line:
            continue
        kind, _, rest = line.partition(";")
        if kind == "source":
            # Paths are relative to the package prefix, including "../../build/<pkg>/..." develop hooks.
            target = Path(rest) if os.path.isabs(rest) else prefix / rest
            # colcon lists each hook in several shells' flavours; the .dsv flavour is the portable one.
            dsv_twin = target.with_suffix(".dsv")
            _apply_dsv(env, prefix, dsv_twin.resolve() if dsv_twin.exists() else dsv_twin, seen)
            continue
        name, _, values = rest.partition(";")
        for value in values.split(";") if values else [""]:
            path = value if os.path.isabs(value) else str(prefix / value) if value else str(prefix)
            if kind in ("prepend-non-duplicate", "prepend-non-duplicate-if-exists"):
                if kind.endswith("if-exists") and not os.path.exists(path):
                    continue
                _prepend(env, name, path)
            elif kind in ("append-non-duplicate", "append-non-duplicate-if-exists"):
                if kind.endswith("if-exists") and not os.path.exists(path):
                    continue
                _append(env, name, path)
            elif kind == "set":
                env[name] = value
            elif kind == "set-if-unset":
                env.setdefault(name, value)
            else:
                logger.debug("ignoring unknown dsv line %r in %s", line, dsv)


def _system_ros_environment(prefix: Path, base: Mapping[str, str]) -> dict[str, str]:
    """The environment after ``source <prefix>/setup.bash``, read back from a child bash."""
    setup = prefix / "setup.bash"
    if not setup.is_file():
        raise RosEnvironmentError(f"the overlay was built against {prefix}, which has no setup.bash any more")
    out = subprocess.run(
        ["bash", "-c", f"source {shlex.quote(str(setup))} >/dev/null 2>&1; env -0"],
        env=dict(base),
        check=True,
        capture_output=True,
    ).stdout
    env: dict[str, str] = {}
    for entry in out.split(b"\0"):
        if b"=" in entry:
            key, _, value = entry.partition(b"=")
            env[key.decode()] = value.decode(errors="surrogateescape")
    return env


def overlay_environment(
    overlay: Overlay | None = None,
    base: Mapping[str, str] | None = None,
    venv_prefix: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) extended so that a Python started with it imports
    rclpy, homie_msgs and the node packages. Idempotent: applying it to its own result changes nothing."""
    overlay = overlay or find_overlay()
    env = dict(os.environ if base is None else base)
    venv = Path(venv_prefix or sys.prefix)
    system = overlay.system_prefix
    if system is not None:
        if str(system) not in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
            env = _system_ros_environment(system, env)
    else:
        _prepend(env, "AMENT_PREFIX_PATH", str(venv))
        _prepend(env, "CMAKE_PREFIX_PATH", str(venv))
        _prepend(env, "LD_LIBRARY_PATH", str(venv / "lib"))
        site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        for libs in sorted(site.glob("ros_*.libs")):
            _prepend(env, "LD_LIBRARY_PATH", str(libs))
        env[WHEELS_BOOTSTRAP_GUARD] = "1"
    seen: set[Path] = set()
    for package_dsv in sorted(overlay.install_dir.glob("*/share/*/package.dsv")):
        prefix = package_dsv.parents[2]
        _apply_dsv(env, prefix, package_dsv, seen)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    # Fast DDS: the project's profile (see fastdds_profile). A profile the user set wins.
    profile = fastdds_profile()
    if profile is not None:
        env.setdefault("FASTRTPS_DEFAULT_PROFILES_FILE", str(profile))
    env[OVERLAY_MARKER] = str(overlay.install_dir)
    return env


#: Free space /dev/shm needs for the shared-memory profile: 16 MB segments for the graph's processes and a
#: few clients (a recorder, tests, rviz), with room to spare. A container's default /dev/shm is 64 MB.
SHM_PROFILE_MIN_FREE_BYTES = 512 * 1024 * 1024


def fastdds_profile(shm_dir: str | os.PathLike[str] = "/dev/shm") -> Path | None:
    """The Fast DDS profile for this machine: ``launch/config/fastdds.xml`` (shared memory with 16 MB segments,
    UDP beside it, a 100 ms heartbeat) where ``shm_dir`` has room for it, else ``fastdds_udp.xml`` (Fast DDS's
    default transports, the same heartbeat).

    Why: the four views (0.8-2.9 MB) do not fit Fast DDS's default 512 kB shared-memory segment, and over
    UDP loopback they cost a graph round 12-15 ms more (BENCHMARKS.md). Where a process cannot map its segment
    (a full /dev/shm), it would fail at start-up or with SIGBUS later, hence the free-space check. With the
    default 3 s heartbeat a lost fragment made an answer arrive 0.3-2.7 s late, hence the 100 ms heartbeat in
    both. Fast DDS's "large data" builtin transports were tried and left out: their TCP transport aborted
    processes at shutdown ("local_endpoint: Bad file descriptor").
    """
    config = repository_root() / "launch" / "config"
    shared, udp = config / "fastdds.xml", config / "fastdds_udp.xml"
    try:
        stats = os.statvfs(shm_dir)
        room = stats.f_bavail * stats.f_frsize >= SHM_PROFILE_MIN_FREE_BYTES
    except OSError:
        room = False
    if room and shared.is_file():
        return shared
    if shared.is_file():
        logger.info("%s has less than %d MB free: Fast DDS runs over UDP (%s)", shm_dir,
                    SHM_PROFILE_MIN_FREE_BYTES // 2**20, udp.name)
    return udp if udp.is_file() else None


def has_overlay(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``env`` (default: this process's) was prepared by :func:`overlay_environment`."""
    env = os.environ if env is None else env
    return bool(env.get(OVERLAY_MARKER))


def reexec_with_overlay(install_dir: str | os.PathLike[str] | None = None) -> None:
    """Make this process able to import rclpy and homie_msgs, re-executing it once if needed.

    ``LD_LIBRARY_PATH`` is read by the dynamic loader only when a process starts, so a process that was
    started without the overlay cannot fix itself in place: it is replaced by a copy of itself with the
    right environment (the same trick as the wheels' bootstrapper). Returns normally when the
    environment is already right; raises :class:`RosEnvironmentError` when there is no overlay.
    """
    if has_overlay():
        return
    env = overlay_environment(find_overlay(install_dir))
    logger.debug("re-executing with the ROS 2 overlay environment from %s", env[OVERLAY_MARKER])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def shell_exports(env: Mapping[str, str], base: Mapping[str, str]) -> str:
    """``export NAME=value`` lines for the variables that differ between ``base`` and ``env``."""
    lines = []
    for name in sorted(env):
        if base.get(name) != env[name]:
            lines.append(f"export {name}={shlex.quote(env[name])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m homiebot.ros.environment [INSTALL_DIR]``: print the exports for scripts/ros_env.sh."""
    args = sys.argv[1:] if argv is None else argv
    try:
        overlay = find_overlay(args[0] if args else None)
        base = dict(os.environ)
        # ros_env.sh sets the wheels' guard only to keep this helper from re-executing itself: the shell
        # itself does not have it yet, so compare against an environment without it.
        base.pop(WHEELS_BOOTSTRAP_GUARD, None)
        print(shell_exports(overlay_environment(overlay, base), base))
    except RosEnvironmentError as err:
        print(f"echo {shlex.quote('[ros_env] ' + str(err))} >&2", file=sys.stdout)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
