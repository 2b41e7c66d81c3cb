"""Live views of a running episode (docs/reports.md): :class:`FoxgloveLiveView` serves it to the Foxglove app."""

from homiebot.live.foxglove_view import FoxgloveLiveView, LiveViewConfig, live_missing

__all__ = ["FoxgloveLiveView", "LiveViewConfig", "live_missing"]
