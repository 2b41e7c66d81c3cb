"""Parallel text world and ALFWorld engine figures: a text observation rendered from the simulator's state,
and a round (one command) through the real ALFWorld engine beside it.

Run: ``.venv/bin/python -m benchmarks.bench_textworld [--tasks 12] [--repeats 2000]``

* text observation from the state: for the tasks' scenes, the robot at each receptacle in turn, the time to
  render what the text world shows there (the arrive text: the receptacle's contents) plus the inventory,
  from a ``WorldState`` already taken; median and p95 over ``--repeats`` renders (target: median <= 1 ms);
* the same including the simulator's ``state()`` snapshot, and the admissible commands;
* the images modes (``--observe images|both``): the observation with the four views rendered (256x256 RGB,
  depth, segmentation) and what they show named (:meth:`MuepObservation.shown`), the robot at each receptacle;
* ALFWorld engine: the tasks exported as game folders and played by their Fast Downward plans, replayed
  without the expert wrapper: median seconds per ``step`` and per ``reset`` (environment start).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from homiebot.eval.muep_suite import Observe, load_suite, observe
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.tasks.alfred import TASK_TYPES
from homiebot.textworld import TextWorld
from homiebot.textworld import alfworld as engine

TARGET_RENDER_MS = 1.0


def _stats(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return f"median {statistics.median(ordered) * 1e3:.3f} ms, p95 {ordered[int(0.95 * (len(ordered) - 1))] * 1e3:.3f} ms (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12, help="tasks of the suite (spread over the six types)")
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args()
    suite = load_suite()
    tasks = [t for i in range(args.tasks) for t in [[x for x in suite if x.task_type == TASK_TYPES[i % 6]][i // 6]]]

    sim = MujocoSimulator(render=False)
    render, with_state, admissible = [], [], []
    for task in tasks:
        sim.reset(task.scene, seed=task.seed)
        world = TextWorld(sim)
        world.reset(task.instruction)
        for receptacle in world.names.receptacles:
            world.location = receptacle
            state = sim.state()
            for _ in range(max(1, args.repeats // (len(tasks) * len(world.names.receptacles)))):
                t0 = time.perf_counter()
                world.arrive_text(receptacle, state)
                world.inventory(state)
                render.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            world.arrive_text(receptacle, sim.state())
            with_state.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            world.admissible_commands()
            admissible.append(time.perf_counter() - t0)
    print(f"text observation from a WorldState: {_stats(render)} (target median <= {TARGET_RENDER_MS} ms)")
    print(f"text observation incl. sim.state(): {_stats(with_state)}")
    print(f"admissible commands (incl. sim.state()): {_stats(admissible)}")
    sim.shutdown()

    # The images modes: the views rendered after the step and named; one sample per receptacle (the robot drives
    # there first, so each sample shows a different place).
    camera = MujocoSimulator(render=True)
    with_views, named = [], []
    for task in tasks[: max(1, len(tasks) // 3)]:
        camera.reset(task.scene, seed=task.seed)
        world = TextWorld(camera)
        world.reset(task.instruction)
        for receptacle in world.names.receptacles:
            step = world.step(f"go to {world.names.text(receptacle)}")
            t0 = time.perf_counter()
            obs = observe(world, Observe.BOTH, step.observation)
            with_views.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            obs.shown(world)
            named.append(time.perf_counter() - t0)
    camera.shutdown()
    print(f"observation with the four views rendered (images / both modes): {_stats(with_views)}")
    print(f"naming what the views show (a text-only model's reading of them): {_stats(named)}")
    sim = MujocoSimulator(render=False)

    if not engine.available():
        print("ALFWorld engine: not installed (pip install -e '.[textworld]')")
        sim.shutdown()
        return
    steps, resets = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for task in tasks:
            sim.reset(task.scene, seed=task.seed)
            game_file = engine.export_game(
                sim,
                task.task_type,
                task.object_type,
                task.receptacle_type,
                task.toggle_type,
                task.instruction,
                Path(scratch) / task.id,
            ).game_file
            planner = engine.AlfworldGame(game_file, expert=True)
            planner.reset()
            plan = list(planner.expert_plan)
            planner.close()
            game = engine.AlfworldGame(game_file)
            t0 = time.perf_counter()
            game.reset()
            resets.append(time.perf_counter() - t0)
            won = False
            for command in plan:
                result = game.step(command)
                steps.append(result.seconds)
                won = result.won
            game.close()
            if not won:
                print(f"warning: {task.id}: the plan did not win on replay")
    print(f"ALFWorld engine, one command (step): {_stats(steps)}")
    print(f"ALFWorld engine, reset (start a game): {_stats(resets)}")
    sim.shutdown()


if __name__ == "__main__":
    main()
