"""console-ha: read-only Home Assistant capabilities for a household's local Console."""

__version__ = "0.1.0"
