"""The Console as a WSGI application, `app`, for any WSGI server: `waitress-serve --threads=12 wsgi:app`.

The data dir is `CONSOLE_HA_DATA_DIR`, else the documented per-user default; trusted host names beyond
the loopback ones come from `CONSOLE_HA_TRUSTED_HOSTS`. Give the server 12 threads, as
`console-ha serve` takes: 8 of which calls to Home Assistant may hold all but 2 (docs/security.md),
and 4 more for MCP calls waiting for the household (docs/mcp.md).
"""

from __future__ import annotations

from console_ha.web import create_app

# create_app opens the Console (console_ha.console) on the resolved data dir, as `console-ha serve` does.
app = create_app()
