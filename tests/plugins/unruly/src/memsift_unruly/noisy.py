"""Prints at import; otherwise a valid (never used) backend plugin."""
from memsift.engine.plugins import BackendPlugin

print("noisy plugin says hello")
backend = BackendPlugin("noisy", lambda ctx: None, "prints when imported (a test plugin)")
