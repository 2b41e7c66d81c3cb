"""HomieBot perception node: publishes the 3D world graph (homie_msgs/WorldGraph and visualization_msgs/MarkerArray) and serves target grounding (ResolveTarget)."""
