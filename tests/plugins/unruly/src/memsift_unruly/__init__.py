"""Plugins that misbehave when imported (memsift's tests only)."""
