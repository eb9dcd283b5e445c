"""console_ha.ha."""
