"""console_ha.store."""
