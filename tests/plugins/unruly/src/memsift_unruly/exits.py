"""Ends the process at import, as a plugin with a bad `if __name__` guard would."""
import sys

sys.exit(3)
