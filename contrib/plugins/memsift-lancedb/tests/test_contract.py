"""memsift's backend contract (memsift.engine.kit.testing) on the LanceDB backend."""

from __future__ import annotations

import pytest

from memsift.engine.kit.testing import BackendContract

pytest.importorskip("memsift_lancedb", reason="the LanceDB plugin is not installed "
                    "(pip install -e contrib/plugins/memsift-lancedb)")


class TestLanceDB(BackendContract):
    backend = "lancedb"
    indexes_sessions = True
