"""Entry point for ``python -m clawd``."""

from clawd.cli import main

raise SystemExit(main())
