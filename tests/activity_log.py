"""An audit log with every event, every reason code and a long program name: the Activity page at its fullest."""

from __future__ import annotations

import secrets

from console_ha.capabilities.registry import REGISTRY
from console_ha.settings.saving import save_settings
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.console_secrets import MAX_TOKEN_NAME_LENGTH
from console_ha.store.datadir import DataDir
from console_ha.store.instances import Instances

# What a stage-1-to-3 refusal (and a refusal after approval) can carry, and what a failed read can.
REFUSAL_CODES = ("UNKNOWN_CAPABILITY", "INVALID_ARGUMENTS", "CAPABILITY_DISABLED", "CAPABILITY_NOT_CONFIGURED",
                 "ENTITY_NOT_ALLOWLISTED", "INVOCATION_LIMIT_EXCEEDED", "CONFIG_INVALID", "CONFIRMATION_INVALID")
FAILURE_CODES = ("HA_UNREACHABLE", "HA_TIMEOUT", "HA_UNAUTHORIZED", "HA_NOT_FOUND", "HA_BAD_RESPONSE",
                 "HA_TLS_ERROR", "HA_NO_STATISTICS", "HA_BUSY", "RESULT_TOO_LARGE", "INTERNAL_ERROR")
# The code the executor records with each event that has one of its own (store/audit.py, executor.py).
EVENT_CODES = {AuditEvent.DENIED: "CONFIRMATION_DENIED", AuditEvent.ASKED_AGAIN: "CONFIRMATION_DENIED",
               AuditEvent.EXPIRED: "CONFIRMATION_INVALID", AuditEvent.REJECTED: "ENTITY_NOT_ALLOWLISTED",
               AuditEvent.FAILED: "HA_TIMEOUT"}
# An API token's name is the household's own text: one word as long as a name may be must wrap, not widen the page.
LONG_PROGRAM = ("the-kitchen-tablet-in-the-hallway-" * 4)[:MAX_TOKEN_NAME_LENGTH]
# Issue 30: the plugin and hook a plugin's line names (the executor's own: `capabilities/executor.py`).
PLUGIN = "quiet_hours"
HOOKS = {AuditEvent.PLUGIN_CHANGED: "before_toolcall", AuditEvent.PLUGIN_DROPPED: "after_toolcall",
         AuditEvent.PLUGIN_SKIPPED: "before_toolcall"}
STAGES = {AuditEvent.PROPOSED: 1, AuditEvent.REJECTED: 3, AuditEvent.EXECUTED: 6, AuditEvent.FAILED: 5}


def record(log: AuditLog, event: AuditEvent, capability: str, code: str | None = None,
           client: str | None = None, instance: str | None = None) -> None:
    """One audit line as the executor writes it (each of its own invocation, as no two lines here are one read's);
    `instance` None writes a line as a Console of one Home Assistant did, with no `instance`."""
    log.record(event, capability=capability, classification="read/external", stage=STAGES.get(event, 4),
               invocation=secrets.token_hex(8), code=code or EVENT_CODES.get(event), client=client,
               duration_ms=1234 if event in (AuditEvent.EXECUTED, AuditEvent.FAILED) else None, instance=instance,
               plugin=PLUGIN if event in HOOKS else None, hook=HOOKS.get(event))


def add_instance(data_dir: DataDir, instance: str, name: str) -> None:
    """Another Home Assistant, named by the household, saved through the settings save as a household makes one."""
    stores = Instances(data_dir).get(instance)
    save_settings(stores.config, stores.token, {"name": name})


def fill(data_dir: DataDir) -> AuditLog:
    """Every capability reaches every outcome; the newest lines hold every event and every reason code."""
    log = AuditLog(data_dir)
    for capability in REGISTRY:
        for event in AuditEvent:
            record(log, event, capability)
    newest = next(iter(REGISTRY))
    for code in REFUSAL_CODES:
        record(log, AuditEvent.REJECTED, newest, code, LONG_PROGRAM)
    for code in FAILURE_CODES:
        record(log, AuditEvent.FAILED, newest, code, LONG_PROGRAM)
    for event in AuditEvent:
        record(log, event, "home_assistant.get_history", client=LONG_PROGRAM)
    # The conversation page's: a new message withdrew it.
    record(log, AuditEvent.CANCELLED, "home_assistant.get_history")
    return log
