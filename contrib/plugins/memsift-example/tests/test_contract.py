"""memsift's backend contract on the example plugin: what every backend keeps, through the kit."""

import pytest

pytest.importorskip(
    "memsift_example", reason="the example plugin is not installed (pip install -e contrib/plugins/memsift-example)"
)

from memsift.engine.kit.testing import BackendContract  # noqa: E402


class TestExample(BackendContract):
    backend = "example"
    provider = "none"
    uses_memsift_embeddings = False  # keyword search only
