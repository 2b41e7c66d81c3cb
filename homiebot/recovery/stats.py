"""What recovery did in an episode, and the CMFR statistics over many (Farag et al. 2025, Fig. 2, Tab. 3, §6).

Per episode (:class:`RecoveryStats`, written as ``recovery/<episode>.json`` in an evaluation directory):
failed subtasks of the base planner (those that enter recovery), how many reached each stage, how many
were judged unimportant, stage 2's outcome, failures by EMMOE error code, LLM calls and tokens.
:func:`summarize` pools them: the share of failed subtasks reaching each stage, the share judged
unimportant, stage 2's success rate (the retried subtask succeeded after the inserted preconditions),
failure reasons by code, and calls / tokens per episode.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from homiebot.files import atomic_write_text

log = logging.getLogger(__name__)

#: Folder of an evaluation directory that holds the per-episode statistics.
STATS_DIR = "recovery"


@dataclass
class RecoveryStats:
    """One episode's recovery counters (all counts)."""

    mode: str = "none"
    stages: list[int] = field(default_factory=list)
    search: bool = False
    instruction: str = ""
    seed: int = 0
    rounds: int = 0  # rounds the wrapper answered
    failed_subtasks: int = 0  # the base planner's subtasks that failed (recovery's entry point)
    reached: dict[str, int] = field(default_factory=lambda: {"1": 0, "2": 0, "3": 0, "4": 0})
    unimportant: int = 0  # stage 1 said: drop it
    stage2_with_steps: int = 0  # stage 2 found missing preconditions
    stage2_retried: int = 0  # the failed subtask was tried again after them
    stage2_success: int = 0  # ... and succeeded
    stage3_with_steps: int = 0
    stage4_with_steps: int = 0
    cot: dict[str, int] = field(default_factory=lambda: {"skip": 0, "insert": 0, "replace": 0})
    search_calls: int = 0
    search_steps: int = 0
    recovery_subtasks: int = 0  # rounds spent on steps recovery inserted
    recovery_failures: int = 0  # of those, how many failed
    failures_by_code: dict[str, int] = field(default_factory=dict)  # every failed round, by error code
    malformed: dict[str, int] = field(default_factory=dict)  # unreadable answers by stage
    dropped_steps: int = 0  # steps in answers that were not executable as written
    call_limit_hits: int = 0
    llm_calls: int = 0  # stage questions asked (answered by the model or from memory)
    prompt_tokens: int = 0  # over all questions, as a stateless model would read them
    completion_tokens: int = 0
    llm_seconds: float = 0.0
    remembered_calls: int = 0  # questions answered from the episode's memory of identical ones (no model call)
    remembered_tokens: int = 0  # their prompt and completion tokens, which no model computed
    reused_tokens: int = 0  # prompt tokens of computed calls that came from the model's key/value cache
    #: Every stage call in order: round, stage, the failed subtask and its code (when the stage has one) and the
    #: answer as the model gave it. The counters say how often a branch fired; these say what the model said.
    calls: list[dict[str, Any]] = field(default_factory=list)

    def count_failure(self, code: str) -> None:
        self.failures_by_code[code] = self.failures_by_code.get(code, 0) + 1

    def count_malformed(self, stage: str) -> None:
        self.malformed[stage] = self.malformed.get(stage, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def episode_file_name(instruction: str, seed: int) -> str:
    """The statistics file of the episode with this instruction and scene seed (what ``Planner.reset`` is given;
    an evaluation's index line carries the same seed)."""
    digest = hashlib.sha1(instruction.encode("utf-8")).hexdigest()[:12]
    return f"{seed}-{digest}.json"


def write_stats(folder: Path, stats: RecoveryStats) -> None:
    """Replace the episode's file atomically (rewritten after every round, so a cut-off run keeps its rounds)."""
    atomic_write_text(folder / episode_file_name(stats.instruction, stats.seed), json.dumps(stats.to_json()))


def load_stats(folder: Path) -> list[dict[str, Any]]:
    episodes = []
    for path in sorted(folder.glob("*.json")):
        try:
            episodes.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as err:
            log.warning("skipping unreadable recovery statistics %s: %s", path, err)
    return episodes


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def summarize(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Pool per-episode statistics into the CMFR figures."""
    n = len(episodes)
    total: Counter[str] = Counter()
    reached: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    malformed: Counter[str] = Counter()
    cot: Counter[str] = Counter()
    for e in episodes:
        for key in ("failed_subtasks", "unimportant", "stage2_with_steps", "stage2_retried", "stage2_success",
                    "stage3_with_steps", "stage4_with_steps", "search_calls", "search_steps", "recovery_subtasks",
                    "recovery_failures", "dropped_steps", "call_limit_hits", "llm_calls", "prompt_tokens",
                    "completion_tokens", "rounds", "remembered_calls", "remembered_tokens", "reused_tokens"):
            total[key] += int(e.get(key, 0))
        total["llm_seconds_x1000"] += int(1000 * float(e.get("llm_seconds", 0.0)))
        reached.update({k: int(v) for k, v in e.get("reached", {}).items()})
        codes.update({k: int(v) for k, v in e.get("failures_by_code", {}).items()})
        malformed.update({k: int(v) for k, v in e.get("malformed", {}).items()})
        cot.update({k: int(v) for k, v in e.get("cot", {}).items()})
    failed = total["failed_subtasks"]
    all_failures = sum(codes.values())
    return {
        "episodes": n,
        "failed_subtasks": failed,
        "reached_share": {stage: _share(reached[stage], failed) for stage in ("1", "2", "3")},
        "stage4_episodes_share": _share(reached["4"], n),
        "unimportant_share": _share(total["unimportant"], reached["1"]),
        "stage2_with_steps_share": _share(total["stage2_with_steps"], reached["2"]),
        "stage2_success": _share(total["stage2_success"], total["stage2_retried"]),
        "stage3_with_steps_share": _share(total["stage3_with_steps"], reached["3"]),
        "cot": dict(cot),
        "search_calls": total["search_calls"],
        "search_steps": total["search_steps"],
        "recovery_subtasks_per_episode": _share(total["recovery_subtasks"], n),
        "recovery_failure_share": _share(total["recovery_failures"], total["recovery_subtasks"]),
        "failures_by_code": dict(sorted(codes.items())),
        "failure_share_by_code": {k: _share(v, all_failures) for k, v in sorted(codes.items())},
        "malformed": dict(sorted(malformed.items())),
        "dropped_steps": total["dropped_steps"],
        "call_limit_hits": total["call_limit_hits"],
        "llm_calls_per_episode": _share(total["llm_calls"], n),
        "tokens_per_episode": _share(total["prompt_tokens"] + total["completion_tokens"], n),
        "completion_tokens_per_episode": _share(total["completion_tokens"], n),
        "llm_seconds_per_episode": _share(total["llm_seconds_x1000"] / 1000.0, n),
        # What the model computed: questions not answered from memory, and the tokens it evaluated or wrote
        # (prompt tokens from its key/value cache and remembered answers excluded).
        "model_calls_per_episode": _share(total["llm_calls"] - total["remembered_calls"], n),
        "computed_tokens_per_episode": _share(
            total["prompt_tokens"] + total["completion_tokens"] - total["remembered_tokens"] - total["reused_tokens"], n),
        # The counts behind the shares (the ablation table prints them: a share of 3 cases reads differently).
        "counts": {
            "reached": {stage: reached[stage] for stage in ("1", "2", "3", "4")},
            **{key: total[key] for key in ("unimportant", "stage2_with_steps", "stage2_retried", "stage2_success",
                                           "stage3_with_steps", "stage4_with_steps", "recovery_subtasks",
                                           "recovery_failures", "llm_calls", "remembered_calls")},
        },
    }


def summary_line(summary: dict[str, Any]) -> str:
    """One line for the CLI under the summary table."""
    reached = summary["reached_share"]

    def share(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.0f}%"

    calls = summary["llm_calls_per_episode"]
    return (f"recovery: {summary['episodes']} episode(s), {summary['failed_subtasks']} failed subtask(s); reached stage "
            f"1/2/3: {share(reached['1'])}/{share(reached['2'])}/{share(reached['3'])}; judged unimportant "
            f"{share(summary['unimportant_share'])}; stage-2 success {share(summary['stage2_success'])}; "
            f"{'n/a' if calls is None else f'{calls:.1f}'} LLM calls per episode (recovery.md)")


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def summary_markdown(summary: dict[str, Any]) -> str:
    """The pooled figures as a Markdown section (``homie metrics`` writes it beside its report)."""
    reached = summary["reached_share"]
    lines = [
        "## Failure recovery",
        "",
        f"{summary['episodes']} episode(s); {summary['failed_subtasks']} failed subtask(s) of the base planner (the entry point of recovery).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| share of failed subtasks reaching stage 1 / 2 / 3 | {_fmt(reached['1'])} / {_fmt(reached['2'])} / {_fmt(reached['3'])} |",
        f"| episodes reaching stage 4 (share) | {_fmt(summary['stage4_episodes_share'])} |",
        f"| judged unimportant (share of stage 1) | {_fmt(summary['unimportant_share'])} |",
        f"| stage 2 found preconditions (share of stage 2) | {_fmt(summary['stage2_with_steps_share'])} |",
        f"| stage 2 success (retried subtask succeeded) | {_fmt(summary['stage2_success'])} |",
        f"| stage 3 proposed a workaround (share of stage 3) | {_fmt(summary['stage3_with_steps_share'])} |",
        f"| chain-of-thought decisions | {_fmt(summary['cot'])} |",
        f"| object search calls / steps | {summary['search_calls']} / {summary['search_steps']} |",
        f"| recovery subtasks per episode | {_fmt(summary['recovery_subtasks_per_episode'])} |",
        f"| LLM calls per episode | {_fmt(summary['llm_calls_per_episode'])} |",
        f"| tokens per episode (prompt + completion) | {_fmt(summary['tokens_per_episode'])} |",
        f"| model calls per episode (not answered from memory) | {_fmt(summary['model_calls_per_episode'])} |",
        f"| tokens the model computed per episode (no cache, no memory) | {_fmt(summary['computed_tokens_per_episode'])} |",
        f"| LLM seconds per episode | {_fmt(summary['llm_seconds_per_episode'])} |",
        f"| unreadable stage answers | {_fmt(summary['malformed'])} |",
        f"| call-limit hits | {summary['call_limit_hits']} |",
        "",
        "Failure reasons (every failed round, by EMMOE error code):",
        "",
        "| code | count | share |",
        "|---|---|---|",
    ]
    for code, count in summary["failures_by_code"].items():
        lines.append(f"| {code} | {count} | {_fmt(summary['failure_share_by_code'][code])} |")
    return "\n".join(lines) + "\n"
