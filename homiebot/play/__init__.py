"""``homie play``: a person at the keyboard as an agent's planner (docs/play.md)."""
