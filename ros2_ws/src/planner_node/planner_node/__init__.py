"""HomieBot high-level planner node: turns the four views, the task and the executor's feedback into one subtask per round (thin wrapper around homiebot.agent.session.PlannerSession)."""
