"""What the physical skills' reaching views cost (homiebot/sim/mujoco/motion_views.py), and the picture in the docs.

Run: ``.venv/bin/python -m benchmarks.bench_reaching_views [--tasks emmoe-084,...] [--repeats N] [--strip PNG]``

Each task runs in-process with ``--skills physical`` and a record that keeps images (as ``homie run`` does), once with
the reaching views and once without (the simulator's switch refused, so the record is the same but for them),
alternating, ``--repeats`` times; reported: the episodes' wall time with and without, their ratio, and the seconds
the reaching views spent rendering (timed inside the renderer's calls) against the episode's wall time without them.
The second figure is the one to read on a shared machine: the wall times of two runs differ by more than the
rendering.

``--strip PNG`` writes the first task's Pick round as one picture: per moment the head camera above the overview
camera, with what had just happened under them (docs/results/reaching-views-emmoe-084.png).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw

from homiebot.agent.loop import run_episode
from homiebot.data.record import EpisodeRecorder, read_motion_views
from homiebot.planner.expert import ExpertPlanner
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.skills.physical import PhysicalSkillSet
from homiebot.tasks.suite import get_task


def _episode(task_id: str, out: Path, reaching: bool) -> tuple[float, float, int]:
    """Wall seconds of one recorded physical episode, the reaching views' render seconds and frames."""
    sim = MujocoSimulator(render=True)
    if not reaching:
        sim.record_motion_views = lambda on=True: None  # type: ignore[method-assign]
    task = get_task(task_id)
    started = time.perf_counter()
    views = None
    if reaching:  # the loop switches them on; keep a handle on the counters
        switch = sim.record_motion_views

        def keep(on: bool = True):
            nonlocal views
            made = switch(on)
            views = made if made is not None else views
            return made

        sim.record_motion_views = keep  # type: ignore[method-assign]
    try:
        run_episode(sim, ExpertPlanner(), task=task, skills=lambda s, seed: PhysicalSkillSet(s, seed=seed),
                    recorder=EpisodeRecorder(out, video=False))
    finally:
        sim.shutdown()
    wall = time.perf_counter() - started
    return wall, (views.render_s if views is not None else 0.0), (views.rendered if views is not None else 0)


def write_strip(record: Path, out: Path, action: str = "Pick", width: int = 192) -> Path:
    """The round of ``action`` in ``record`` as one picture: head camera above overview, a caption under each."""
    rounds = [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines()]
    index = next(r["round"] for r in rounds if r["subtask"] and r["subtask"]["action"] == action)
    moments = read_motion_views(record)[index]
    frames = [(Image.open(record / m["views"]["head"]), Image.open(record / m["views"]["overview"]), m["label"])
              for m in moments]
    height = frames[0][0].height
    caption = 52
    strip = Image.new("RGB", (width * len(frames), 2 * height + caption), (255, 255, 255))
    draw = ImageDraw.Draw(strip)
    for i, (head, overview, label) in enumerate(frames):
        strip.paste(head.resize((width, height)), (i * width, 0))
        strip.paste(overview.resize((width, height)), (i * width, height))
        what, _, where = label.partition("; ")
        what, _, motion = what.partition(", hand ")
        lines = [(what, (0, 0, 0)), (f"hand {motion}" if motion else "", (0, 0, 0)),
                 (where.replace(" m in base_link", " m"), (90, 90, 90))]
        for row, (text, colour) in enumerate(lines):
            draw.text((i * width + 3, 2 * height + 3 + 16 * row), text[:32], fill=colour)
    out.parent.mkdir(parents=True, exist_ok=True)
    strip.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)  # a small PNG
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="emmoe-084")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--strip", type=Path, default=None)
    args = parser.parse_args()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for task_id in args.tasks.split(","):
            on, off, render, frames = [], [], [], 0
            for repeat in range(args.repeats):
                for reaching in (repeat % 2 == 0, repeat % 2 == 1):  # alternate which goes first
                    out = Path(tmp) / f"{task_id}-{repeat}-{int(reaching)}"
                    wall, render_s, rendered = _episode(task_id, out, reaching)
                    if reaching:
                        on.append(wall)
                        render.append(render_s)
                        frames = rendered
                        if args.strip is not None and not rows and repeat == 0:
                            print(f"strip: {write_strip(out, args.strip)}")
                    else:
                        off.append(wall)
            row = {"task": task_id, "moments": frames, "wall_with_s": statistics.median(on),
                   "wall_without_s": statistics.median(off), "render_s": statistics.median(render)}
            row["ratio_wall"] = row["wall_with_s"] / row["wall_without_s"]
            row["ratio_render"] = (row["wall_without_s"] + row["render_s"]) / row["wall_without_s"]
            rows.append(row)
            print(json.dumps(row))


if __name__ == "__main__":
    main()
