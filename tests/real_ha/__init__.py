"""Tests against a real Home Assistant core, installed and started by the `real_ha` fixture."""
