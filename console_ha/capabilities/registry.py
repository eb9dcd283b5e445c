"""The registered capabilities, built from their modules: the one list a new capability is added to."""

from __future__ import annotations

from console_ha.capabilities import get_history, list_entities
from console_ha.capabilities.spec import Capability

# In this order the model, MCP clients and the activity page meet them.
CAPABILITIES: tuple[Capability, ...] = (list_entities.CAPABILITY, get_history.CAPABILITY)

REGISTRY: dict[str, Capability] = {capability.name: capability for capability in CAPABILITIES}
