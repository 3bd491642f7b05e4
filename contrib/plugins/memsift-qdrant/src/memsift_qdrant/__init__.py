"""memsift-qdrant: one agent's memory in Qdrant, behind memsift's `SearchManager` (see README.md)."""

from .plugin import QdrantConfig, backend

__all__ = ["QdrantConfig", "backend"]
