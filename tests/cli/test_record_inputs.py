"""What the planner saw is in the record: every round's world description (``--describe-world``), exactly as the
planner received it, the files of the views it saw (they survive reading the record back), and with perception
the world graph after every round (``world_graphs.jsonl``)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.data.record import EpisodeRecorder, read_episode
from homiebot.perception.world_model import PerceptionConfig, WorldModel
from homiebot.planner.expert import ExpertPlanner
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import get_task


class CapturingExpert(ExpertPlanner):
    """The expert, keeping each request's world description (what a model planner would have been sent)."""

    def __init__(self) -> None:
        super().__init__()
        self.descriptions: list[str | None] = []

    def plan(self, request):  # type: ignore[no-untyped-def]
        self.descriptions.append(request.world_description)
        return super().plan(request)


def _episode(out: Path, describe: bool) -> tuple[CapturingExpert, list[dict]]:
    planner = CapturingExpert()
    perception = functools.partial(WorldModel, config=PerceptionConfig.model_validate(
        {"builder": "privileged", "describe_world": describe}))
    sim = make_simulator("mujoco", render=True)
    try:
        run_episode(sim, planner, task=get_task("demo-drawer"), config=EpisodeConfig(render=True),
                    recorder=EpisodeRecorder(out, images=True, video=False), perception=perception)
    finally:
        sim.shutdown()
    return planner, [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]


def test_world_description_and_views_per_round(tmp_path: Path) -> None:
    planner, rounds = _episode(tmp_path / "described", describe=True)
    assert len(rounds) == len(planner.descriptions) >= 3
    assert [r["world_description"] for r in rounds] == planner.descriptions  # exactly what the planner got
    assert all(d and "Robot:" in d for d in planner.descriptions)
    assert len(set(planner.descriptions)) > 1  # it follows the episode (the robot moves, the can moves)
    for r in rounds:
        assert r["views"] == [f"subtask{r['round']}_{v}.png" for v in ("front", "left", "back", "right")]
        assert all((tmp_path / "described" / name).is_file() for name in r["views"])
    back = read_episode(tmp_path / "described")
    assert [r.world_description for r in back.rounds] == planner.descriptions
    # The world graph after every round (perception ran): one line per round, the last with the can in the drawer.
    graphs = [json.loads(line) for line in (tmp_path / "described" / "world_graphs.jsonl").read_text().splitlines()]
    assert [g["round"] for g in graphs] == [r["round"] for r in rounds]
    last = graphs[-1]["graph"]
    names = {n["id"]: n["name"] for n in last["nodes"]}
    assert any(names.get(e["source"]) == "short_can" and e["relation"] == "in" and "kitchen_drawer" in names.get(e["target"], "")
               for e in last["edges"]), last["edges"]


def test_no_description_key_without_describe_world(tmp_path: Path) -> None:
    planner, rounds = _episode(tmp_path / "plain", describe=False)
    assert set(planner.descriptions) == {None}
    assert all("world_description" not in r for r in rounds)
