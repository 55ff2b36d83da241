"""`python -m strom ...` is the `strom` command."""

from strom.broker.process.cli import main

raise SystemExit(main())
