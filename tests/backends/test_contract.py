"""The backend contract (memsift.engine.testing) on memsift's own backends: builtin always, QMD
with the real binary on PATH, Postgres on a real server (each skips, saying why, without it).
Plugin packages run the same class against theirs (contrib/plugins/memsift-lancedb)."""

from __future__ import annotations

from helpers import backend_memory
from memsift.engine.testing import BackendContract


class TestBuiltin(BackendContract):
    backend = "builtin"
    indexes_sessions = True


class TestQmd(BackendContract):
    backend = "qmd"
    uses_memsift_embeddings = False  # QMD embeds with its own models
    indexes_memsift_text = False  # QMD's own keyword index: "tromso" does not find "Tromsø" (docs/operators/qmd.md)

    def memory_config(self, tmp_path):
        memory = backend_memory("qmd")
        memory["qmd"]["update"] = {"debounceMs": 0}
        return memory


class TestPostgres(BackendContract):
    backend = "postgres"
    indexes_sessions = True

    def memory_config(self, tmp_path):
        return backend_memory("postgres")
