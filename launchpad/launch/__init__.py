"""Launchers: turn a program's nodes into threads or processes (later, cluster jobs)."""
