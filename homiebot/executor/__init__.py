"""Low-level execution: EMMOE error detection (F1/F2, L1-L4, D1/D2, E1/E2), three tries, feedback."""

from homiebot.executor.executor import ExecutionReport, Executor, ExecutorConfig, SimulatorSkills, SkillRunner

__all__ = ["ExecutionReport", "Executor", "ExecutorConfig", "SimulatorSkills", "SkillRunner"]
