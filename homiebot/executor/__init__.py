"""Low-level execution: EMMOE error detection (F1/F2, L1-L4, D1/D2, E1/E2), three tries, feedback."""

from homiebot.executor.executor import Executor, ExecutorConfig, ExecutionReport, SimulatorSkills, SkillRunner

__all__ = ["Executor", "ExecutorConfig", "ExecutionReport", "SimulatorSkills", "SkillRunner"]
