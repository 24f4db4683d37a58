"""``stack up`` installs its services at once, and reports the first failure after every install ended.

On a fresh machine the object store's Go build (about 100 s of two cores) ran alone before Maven
downloaded Kafka, Debezium and Keycloak; measured cold with empty caches, the installs took 151 s one
after another and 108 s at once (docs/benchmarks.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_lake.config import StackSettings
from cdc_lake.exceptions import StackError
from cdc_lake.stack.manager import LocalStack


def test_every_service_installs_at_the_same_time_and_the_first_failure_is_raised_after_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = LocalStack(StackSettings(data_dir=tmp_path / "stack"))
    services = stack.services
    together = threading.Barrier(len(services), timeout=10)
    finished: list[str] = []

    def installer(name: str) -> Callable[[], None]:
        def install() -> None:
            together.wait()  # breaks (BrokenBarrierError) unless every install is running at once
            if name == "kafka":
                raise StackError("kafka could not be resolved")
            finished.append(name)

        return install

    for service in services:
        monkeypatch.setattr(service, "install", installer(service.name))
    progress: list[str] = []

    with pytest.raises(StackError, match="kafka could not be resolved"):
        stack._install(progress.append)

    assert sorted(finished) == sorted(s.name for s in services if s.name != "kafka")
    assert "kafka" in progress[0] and len(progress) == len(services)
