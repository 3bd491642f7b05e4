"""memsift-lancedb: a memsift backend keeping each agent's memory in an embedded LanceDB
database (no server). Registered as `lancedb` through the `memsift.backends` entry point."""

__version__ = "0.1.0"

import os

# Lance's own stderr log (its deprecation notes, "dataset will be created") is not the user's: set
# before lancedb loads its native library, which reads it once.
os.environ.setdefault("LANCEDB_LOG", "error")
