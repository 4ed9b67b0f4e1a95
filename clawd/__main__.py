"""Entry point for ``python -m clawd``."""

from clawd.frontends.cli import main

raise SystemExit(main())
