"""The Console as a WSGI application, `app`, for any WSGI server: `waitress-serve --threads=22 wsgi:app`.

The data dir is `CONSOLE_HA_DATA_DIR`, else the documented per-user default; trusted host names beyond
the loopback ones come from `CONSOLE_HA_TRUSTED_HOSTS`. Give the server 22 threads, as `console-ha serve`
runs them (`cli.server_threads`; why, in docs/security.md's table of limits).
"""

from __future__ import annotations

from console_ha.web import create_app

# create_app opens the Console (console_ha.console) on the resolved data dir, as `console-ha serve` does.
app = create_app()
