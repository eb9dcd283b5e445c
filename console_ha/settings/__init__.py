"""console_ha.settings.service."""
