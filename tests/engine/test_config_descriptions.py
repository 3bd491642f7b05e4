"""Every config key is described: the configuration reference is made from these descriptions."""

from __future__ import annotations

import sys

from helpers import REPO
from memsift.engine.config import models
from memsift.engine.records import Record
from memsift.engine.records.schema import model_of

sys.path.insert(0, str(REPO / "contrib" / "docs"))
from reference import config_keys, config_reference  # noqa: E402


def _models() -> list[type[Record]]:
    return [m for m in vars(models).values()
            if isinstance(m, type) and issubclass(m, Record) and m.__module__ == models.__name__
            and not m.__name__.startswith("_")]


def test_every_config_key_has_a_description():
    missing = [f"{model.__name__}.{name}" for model in _models() for name, info in model.model_fields.items()
               if not (info.description or "").strip()]
    assert not missing, f"config keys without a description: {missing}"


def test_the_reference_lists_every_key_with_its_description():
    text = config_reference()
    paths = [path for path, _info, _owner in config_keys(model_of(models.MemsiftConfig))]
    assert len(paths) > 150  # every section, down to memory.qmd.update.embedTimeoutMs
    for path, info, _owner in config_keys(model_of(models.MemsiftConfig)):
        if path.startswith("agents.list[].memorySearch."):
            continue  # the same keys as agents.defaults.memorySearch, listed once
        key = path.rsplit(".", 1)[-1]
        assert f"{key}` |" in text and info.description in text, path
    for heading in ("Top level", "`agents`", "`agents.defaults`", "`agents.list[]`", "`agents.defaults.memorySearch`",
                    "`memory`"):
        assert f"## {heading}\n" in text, heading
    assert "| `qmd.update.embedTimeoutMs` |" in text and "| `postgres.pool.maxSize` |" in text
