"""manip_executor entry point (``python -m executor_nodes.manip_executor``); see :mod:`executor_nodes.skill_executors`."""

from executor_nodes.skill_executors import manip_main

if __name__ == "__main__":
    manip_main()
