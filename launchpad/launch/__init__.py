"""Launchers: turn a program's nodes into threads (and, later, processes and jobs)."""
