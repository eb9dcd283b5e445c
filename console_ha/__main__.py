"""`python -m console_ha`: the same as the `console-ha` command."""

from __future__ import annotations

from console_ha.cli import main

raise SystemExit(main())
