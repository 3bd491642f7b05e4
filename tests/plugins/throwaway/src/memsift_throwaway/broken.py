"""A plugin whose import fails, as a half-installed package's would."""

import memsift_throwaway_missing_dependency  # noqa: F401

backend = None
