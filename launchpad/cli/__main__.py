"""`python -m launchpad.cli`: the `launchpad` command."""

import sys

from launchpad.cli import main

sys.exit(main())
