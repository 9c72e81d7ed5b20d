"""`python -m engine.cli`: the same as the `specprefill` command."""

import sys

from engine.cli.main import main

sys.exit(main())
