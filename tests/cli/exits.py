"""`launchpad launch tests/cli/exits.py --greeting=TEXT --status=N`: says how it was run
(its flags, argv, module name, first path entry), then exits with status N."""

from __future__ import annotations

import os
import sys

from absl import app, flags

_GREETING = flags.DEFINE_string("greeting", "none", "what to say")
_STATUS = flags.DEFINE_integer("status", 0, "the exit status")


def main(argv) -> None:
    print(f"greeting={_GREETING.value} argv={argv[1:]} name={__name__} "
          f"path0={os.path.relpath(sys.path[0])}", flush=True)
    sys.exit(_STATUS.value)


if __name__ == "__main__":
    app.run(main)
