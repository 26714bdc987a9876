"""Program functions for `launchpad kubernetes-manifests MODULE:FUNCTION`'s error tests."""

from __future__ import annotations


def broken():
    raise ValueError("no program today")


def not_a_program():
    return 42
