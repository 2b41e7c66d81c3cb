"""The physical skills against the oracle ones, in one run: the expert on EMMOE-100 with ``--skills oracle`` and
``--skills physical`` (noiseless, run 0 of each task), success, every failed skill attempt by cause, episode time and
the physics' real-time factor.

Run: ``.venv/bin/python -m benchmarks.bench_physical_skills [--split all|train|test] [--limit N] [--out FILE]
[--articulation oracle|physical|both] [--from FILE]``

``--articulation`` sets how the physical skill set runs Open and Close (``PhysicalSkillSet(articulation=...)``,
homiebot/skills/physical/articulation.py; ``--articulation`` of homie run and homie eval): "oracle" (this benchmark's
default, so that its ``physical`` rows stay comparable with earlier ones; the skill set's default is "physical"),
"physical" (the arm moves the door or drawer), or "both" (each task runs the physical skills
twice, once each way, after the oracle skills; the rows are then labelled ``physical`` and ``physical+arm``). The
Open/Close line counts every Open and Close attempt per setting, and its failures by cause.

* SR: episodes whose goal check holds, per setting;
* causes: each failed attempt of a physical skill, classified from the skill's message (the executor logs each
  try): grasp impossible (the object wider than the open gripper, refused before the arm moves), unreachable pose,
  arm blocked (the trajectory controller's tolerance, with what it touched; or no clear motion back to the tuck),
  grasp missed, object slipped or did not stay where it was put (dropped), no path for the base, the base stopped
  while a Pick or Put moved it closer, other;
* episode wall time: median and mean per setting and their ratio (the target: physical at most 3x oracle), and the
  ratio of the episodes' mean CPU time (the process's, ``time.process_time``), which other jobs on a shared machine
  inflate less;
* real-time factor: simulated seconds of physics over the wall seconds spent in ``mj_step`` (one core; target at
  least 10x).

``--render`` renders the four views every round, as ``homie run`` and ``homie eval`` do for a planner that reads
them: the episode times are then those of a user's run. Without it an oracle episode is bookkeeping alone (about
0.1 s), and the ratio compares physics with nothing.

Both settings run in this process, one task after the other, so the ratio is measured under the same load.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table

from homiebot.agent.build import build_episode
from homiebot.config.run import RunConfig
from homiebot.skills.physical import PhysicalSkillSet
from homiebot.skills.physical import skillset as physical_skillset
from homiebot.tasks.suite import load_suite

#: Failure causes, first match wins (the physical skills' messages: homiebot/skills/physical/*.py).
CAUSES: tuple[tuple[str, str], ...] = (
    ("grasp impossible (wider than the gripper)", r"grasp impossible"),
    ("unreachable pose", r"unreachable pose"),
    ("arm blocked", r"the arm (stopped|could not tuck|stays out)"),
    ("base stopped before a Pick or Put", r"the base stopped while"),
    ("grasp missed", r"grasp missed"),
    ("slipped from the gripper", r"slipped out of the gripper"),
    ("did not stay where put", r"did not stay there"),
    ("no free spot", r"no free spot"),
    ("no path for the base", r"no collision-free path|no free pose|could not reach a pose"),
    ("refused (logical check)", r"^(too_far|too_close|hand_full|hand_empty|container_closed|not_interactive|not_found)"),
)
_TRY = re.compile(r"^(?P<action>.+?) (?P<target>\S+) try \d+ failed: (?P<status>\S+) (?P<detail>.*)$")


def cause_of(status: str, detail: str) -> str:
    text = f"{status} {detail}"
    for cause, pattern in CAUSES:
        if re.search(pattern, detail) or re.search(pattern, text):
            return cause
    return "other"


class _Attempts(logging.Handler):
    """Collects the executor's "try N failed" lines (homiebot/executor/executor.py logs each at DEBUG)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.failures: list[tuple[str, str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        match = _TRY.match(record.getMessage())
        if match:
            self.failures.append((match["action"], match["target"], match["status"], match["detail"]))


@dataclass
class Outcome:
    task: str
    mode: str
    success: bool
    rounds: int
    wall_s: float
    sim_s: float
    physics_steps: int = 0
    physics_wall_s: float = 0.0
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)
    subtasks: list[tuple[str, str]] = field(default_factory=list)
    #: How the physical skill set ran Open and Close ("oracle" or "physical"); "" for the oracle skills.
    articulation: str = ""
    #: The process's CPU time over the episode (s): steadier than the wall time on a shared machine (0: not measured).
    cpu_s: float = 0.0

    @property
    def setting(self) -> str:
        return "physical+arm" if self.mode == "physical" and self.articulation == "physical" else self.mode


def run_one(task: str, mode: str, attempts: _Attempts, render: bool = False, articulation: str = "oracle") -> Outcome:
    config = RunConfig.model_validate({"task": task, "skills": {"mode": mode}, "simulator": {"render": render}})
    # The physical skill set reads its default Open/Close setting when it is built (inside the episode's factory).
    default = physical_skillset.ARTICULATION
    physical_skillset.ARTICULATION = articulation
    try:
        return _run(task, mode, config, attempts, articulation if mode == "physical" else "")
    finally:
        physical_skillset.ARTICULATION = default


def _run(task: str, mode: str, config: RunConfig, attempts: _Attempts, articulation: str) -> Outcome:
    episode = build_episode(config)
    made = []
    factory = episode.skills
    assert factory is not None

    def keep(sim, seed):  # the physical skill set holds the driver's physics counters
        skills = factory(sim, seed)
        made.append(skills)
        return skills

    episode.skills = keep
    attempts.failures = []
    started, cpu = time.perf_counter(), time.process_time()
    try:
        trajectory = episode.run()
        sim_s = float(episode.simulator.sim_time)  # type: ignore[attr-defined]
    finally:
        episode.close()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    driver = made[0].driver if made and isinstance(made[0], PhysicalSkillSet) else None
    return Outcome(
        task, mode, bool(trajectory.goal_satisfied), len(trajectory.rounds), wall, sim_s,
        physics_steps=driver.physics_steps if driver is not None else 0,
        physics_wall_s=driver.physics_wall_s if driver is not None else 0.0,
        failures=list(attempts.failures),
        subtasks=[(r.subtask_text, r.feedback.code.value) for r in trajectory.rounds],
        articulation=articulation,
        cpu_s=cpu,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="all", choices=("all", "train", "test"))
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks (0: all)")
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: the suite's)")
    parser.add_argument("--out", type=Path, default=None, help="write every outcome as JSON here")
    parser.add_argument("--render", action="store_true", help="render the four views every round (a user's run)")
    parser.add_argument("--from", dest="from_file", type=Path, default=None,
                        help="print the tables of an earlier run's --out file instead of running")
    parser.add_argument("--articulation", default="oracle", choices=("oracle", "physical", "both"),
                        help="how the physical skill set runs Open and Close (module docstring)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    attempts = _Attempts()
    executor_log = logging.getLogger("homiebot.executor.executor")
    executor_log.setLevel(logging.DEBUG)
    executor_log.addHandler(attempts)
    executor_log.propagate = False

    tasks = [t.id for t in load_suite("emmoe100").tasks if args.split in ("all", t.split)]
    if args.tasks:
        tasks = args.tasks.split(",")
    if args.limit:
        tasks = tasks[: args.limit]
    if args.from_file is not None:
        saved = json.loads(args.from_file.read_text())
        keys = {f.name for f in dataclasses.fields(Outcome)}
        summarise([Outcome(**{k: v for k, v in o.items() if k in keys}) for o in saved], args.render)
        return
    outcomes: list[Outcome] = []
    articulations = ("oracle", "physical") if args.articulation == "both" else (args.articulation,)
    for task in track(tasks, description="episodes"):
        outcomes.append(run_one(task, "oracle", attempts, render=args.render))
        for articulation in articulations:
            outcomes.append(run_one(task, "physical", attempts, render=args.render, articulation=articulation))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps([{**o.__dict__, "setting": o.setting} for o in outcomes], indent=1))
    summarise(outcomes, args.render)


def summarise(outcomes: list[Outcome], render: bool = False) -> None:
    """The tables (module docstring) for ``outcomes``."""
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    console = Console()
    views = ", views rendered" if render else ""
    table = Table(title=f"expert on EMMOE-100 ({len(tasks)} tasks, run 0, noiseless{views}): oracle vs physical skills")
    for column in ("skills", "SR", "episode wall median s", "episode wall mean s", "sim s mean", "rounds mean"):
        table.add_column(column, justify="right")
    walls = {}
    settings = list(dict.fromkeys(o.setting for o in outcomes))
    for setting in settings:
        mine = [o for o in outcomes if o.setting == setting]
        walls[setting] = [o.wall_s for o in mine]
        table.add_row(setting, f"{100 * sum(o.success for o in mine) / len(mine):.1f}",
                      f"{statistics.median(walls[setting]):.2f}", f"{statistics.mean(walls[setting]):.2f}",
                      f"{statistics.mean(o.sim_s for o in mine):.1f}", f"{statistics.mean(o.rounds for o in mine):.1f}")
    console.print(table)
    for setting in settings:
        opens = [(o.task, s, code) for o in outcomes if o.setting == setting for (s, code) in o.subtasks
                 if s.split(" ")[0] in ("Open", "Close") or s.startswith(("[Open", "[Close"))]
        ok = sum(code == "OK" for (_t, _s, code) in opens)  # ErrorCode.OK
        failed = Counter(cause_of(status, detail) for o in outcomes if o.setting == setting
                         for (action, _t, status, detail) in o.failures if action in ("Open", "Close"))
        console.print(f"{setting}: Open/Close rounds {ok}/{len(opens)} succeeded; failed Open/Close tries by cause: "
                      f"{dict(failed.most_common())}")
    arm = "physical+arm" if "physical+arm" in settings and "physical" not in settings else "physical"
    physical = [o for o in outcomes if o.setting == arm]
    ratio = statistics.mean(walls[arm]) / statistics.mean(walls["oracle"])
    oracle_cpu = [o.cpu_s for o in outcomes if o.setting == "oracle"]
    steps = sum(o.physics_steps for o in physical)
    physics_wall = sum(o.physics_wall_s for o in physical)
    console.print(f"physical / oracle episode wall time (means): x{ratio:.2f}")
    if all(o.cpu_s > 0 for o in physical) and oracle_cpu and all(c > 0 for c in oracle_cpu):
        # The process's CPU time: what another job on the machine's cores does not inflate as much as the wall time.
        console.print(f"physical / oracle episode CPU time (means): x{statistics.mean(o.cpu_s for o in physical) / statistics.mean(oracle_cpu):.2f} "
                      f"({statistics.mean(o.cpu_s for o in physical):.2f} s / {statistics.mean(oracle_cpu):.2f} s)")
    if physics_wall > 0:
        console.print(f"physics: {steps} steps of 5 ms = {steps * 0.005:.0f} s simulated in {physics_wall:.1f} s of mj_step: "
                      f"real-time factor x{steps * 0.005 / physics_wall:.0f}")
    causes = Counter(cause_of(status, detail) for o in physical for (_a, _t, status, detail) in o.failures)
    failed_tasks = [o for o in physical if not o.success]
    task_causes = Counter()
    for o in failed_tasks:
        first = Counter(cause_of(status, detail) for (_a, _t, status, detail) in o.failures).most_common(1)
        task_causes[first[0][0] if first else "no failed skill (planner or goal)"] += 1
    cause_table = Table(title="physical: failed skill attempts by cause (all episodes), and failed episodes by main cause")
    cause_table.add_column("cause")
    cause_table.add_column("attempts", justify="right")
    cause_table.add_column("failed episodes", justify="right")
    for cause in sorted(set(causes) | set(task_causes), key=lambda c: -causes.get(c, 0)):
        cause_table.add_row(cause, str(causes.get(cause, 0)), str(task_causes.get(cause, 0)))
    console.print(cause_table)
    both = {o.task for o in outcomes if o.mode == "oracle" and o.success}
    console.print(f"tasks the oracle skills complete and the physical ones do not: "
                  f"{sorted(o.task for o in failed_tasks if o.task in both)[:40]}")


if __name__ == "__main__":
    main()
