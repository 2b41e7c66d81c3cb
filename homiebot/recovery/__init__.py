"""Conditional multi-stage failure recovery around any planner (CMFR, Farag et al., REALM@ACL 2025).

:class:`~homiebot.recovery.planner.RecoveryPlanner` wraps a base planner; :mod:`.prompts` holds the stage
prompts, :mod:`.parsing` their grammars and parsers, :mod:`.scene` the scene representation, :mod:`.llm` the
model interface, :mod:`.stats` the statistics. docs/recovery.md describes the design and the measurements.
"""
