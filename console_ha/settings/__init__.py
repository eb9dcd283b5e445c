"""console_ha.settings.settings_service."""
