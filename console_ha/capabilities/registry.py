"""The registered capabilities, built from their modules: the one list a new capability is added to."""

from __future__ import annotations

from functools import reduce
from operator import or_

from console_ha.capabilities import (
    find_entities,
    get_history,
    get_logbook,
    get_state,
    get_statistics,
    list_areas,
    list_entities,
)
from console_ha.capabilities.spec import Capability
from console_ha.ha.reads import Reads

# In this order the model, MCP clients and the activity page meet them.
CAPABILITIES: tuple[Capability, ...] = (
    list_entities.CAPABILITY,
    get_history.CAPABILITY,
    get_state.CAPABILITY,
    find_entities.CAPABILITY,
    list_areas.CAPABILITY,
    get_statistics.CAPABILITY,
    get_logbook.CAPABILITY,
)

REGISTRY: dict[str, Capability] = {capability.name: capability for capability in CAPABILITIES}

# Every Home Assistant read the capabilities declare: the composition root hands it (with the settings
# page's own) to the Console's client, which reads nothing else.
HOME_ASSISTANT_READS: Reads = reduce(or_, (capability.reads for capability in CAPABILITIES), Reads())
