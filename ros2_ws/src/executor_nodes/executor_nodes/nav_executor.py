"""nav_executor entry point (``python -m executor_nodes.nav_executor``); see :mod:`executor_nodes.skill_executors`."""

from executor_nodes.skill_executors import nav_main

if __name__ == "__main__":
    nav_main()
