"""memsift's backend contract on the Qdrant plugin (local mode): what every backend keeps."""

import pytest

pytest.importorskip(
    "memsift_qdrant", reason="the Qdrant plugin is not installed (pip install -e contrib/plugins/memsift-qdrant)"
)

from memsift.engine.kit.testing import BackendContract  # noqa: E402


class TestQdrant(BackendContract):
    backend = "qdrant"
    indexes_sessions = True
