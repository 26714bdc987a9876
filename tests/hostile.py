"""What hostile-input tests send: payloads that show whether something was unpickled."""

from __future__ import annotations

import os


class MkdirOnUnpickle:
    """Unpickling this object creates a directory: a harmless stand-in for code execution."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))
