"""Counters the reliability suites add to (queries fuzzed, faults injected, crashes, lost updates);
tests/reliability/conftest.py prints them at the end of the run."""

from __future__ import annotations

from collections import Counter

FIGURES: Counter[str] = Counter()
