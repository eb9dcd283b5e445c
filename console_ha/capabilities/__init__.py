"""console_ha.capabilities.execute."""
