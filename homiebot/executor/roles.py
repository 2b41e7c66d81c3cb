"""The agents of a two-agent episode and what each may do: PARTNR's robot (agent 0) and human (agent 1).

PARTNR (appendix A.9.1) gives the human the state-changing skills the robot lacks (Clean, Fill, Pour, PowerOn,
PowerOff: in EMMOE's action names Turn on, Turn off, Clean, Fill, Pour) and both agents its ``Wait`` tool. These are
settings of each agent's executor (its action list, its name, the actions it lacks, which it answers F1 naming
the reason), so they live beside the executor: the one build path (:mod:`homiebot.agent.build`) gives a pair's
agents their executors from here, and the executor nodes of the ROS 2 graph do the same for their role.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from homiebot.executor.executor import ExecutorConfig
from homiebot.types import casefold_words

#: PARTNR's Wait tool as an EMMOE action: a round of one agent that executes nothing (two-agent episodes only).
WAIT_ACTION = "Wait"
#: The EMMOE-format actions only the human has (PARTNR A.9.1: Clean, Fill, Pour, PowerOff, PowerOn).
HUMAN_ONLY_ACTIONS: tuple[str, ...] = ("Turn on", "Turn off", "Clean", "Fill", "Pour")
#: The agents of a pair by id (the simulator's agent index).
AGENT_NAMES: tuple[Literal["robot", "human"], ...] = ("robot", "human")

AgentName = Literal["robot", "human"]


def role_actions(agent: AgentName, actions: Sequence[str]) -> tuple[str, ...]:
    """``actions`` for ``agent``: the robot without the human-only ones; both with Wait before End."""
    human_only = {casefold_words(h) for h in HUMAN_ONLY_ACTIONS}
    kept = [a for a in actions if agent == "human" or casefold_words(a) not in human_only]
    body = [a for a in kept if casefold_words(a) not in ("end", casefold_words(WAIT_ACTION))]
    return (*body, WAIT_ACTION, "End")


def role_executor(agent: AgentName, base: ExecutorConfig) -> ExecutorConfig:
    """The executor configuration of one agent of a pair: its action list and name, and the actions of the base
    list it lacks (the executor answers those F1 naming the reason)."""
    own = role_actions(agent, base.actions)
    withheld = tuple(a for a in base.actions if a not in own and casefold_words(a) != "end")
    return replace(base, actions=own, agent=agent, withheld_actions=withheld)
