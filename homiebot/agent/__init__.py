"""The agent: HomieBot's episode loop (planner -> executor -> skills -> simulator) and the HLP session."""
