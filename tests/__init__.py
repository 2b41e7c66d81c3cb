"""The project's test suite as a regular package: some dependencies install a top-level ``tests`` package of their
own into site-packages (draccus, which LeRobot needs, does), and a regular package there would win over this folder
as a namespace package, breaking ``from tests.cli... import``."""
