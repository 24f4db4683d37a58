"""The test tree's own rule: test module basenames are unique across ``tests/``.

The test folders are not packages, so pytest imports each module by its basename: two modules named
alike make the second fail to collect ("import file mismatch"), which stopped a whole CI phase once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_every_test_module_has_its_own_basename() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))

    assert [name for name, count in names.items() if count > 1] == []
