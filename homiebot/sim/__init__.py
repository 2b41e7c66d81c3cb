"""Simulators: the protocol (``base``), the scene description (``scene``) and backends (``mujoco``, adapters)."""
