"""The registered capabilities, built from their modules: the one list a new capability is added to."""

from __future__ import annotations

from functools import reduce
from operator import or_

from console_ha.capabilities import (
    find_entities,
    get_calendar,
    get_forecast,
    get_history,
    get_logbook,
    get_state,
    get_statistics,
    get_todo,
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
    # issue 28: offered only while an allowlisted calendar, to-do list or weather entity can answer them.
    get_calendar.CAPABILITY,
    get_todo.CAPABILITY,
    get_forecast.CAPABILITY,
)

REGISTRY: dict[str, Capability] = {capability.name: capability for capability in CAPABILITIES}

# Every Home Assistant read the capabilities declare: the composition root hands it (with the settings
# page's own) to the Console's client, which reads nothing else.
HOME_ASSISTANT_READS: Reads = reduce(or_, (capability.reads for capability in CAPABILITIES), Reads())
