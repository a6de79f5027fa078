"""`rag eval` subcommand (placeholder until the harness lands)."""

from __future__ import annotations


def register(sub) -> None:
    """Add the eval subcommand(s) to the `rag` argument parser."""
