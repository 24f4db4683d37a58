"""One bootstrap per table: the SQLite file lock and the in-memory lock refuse a second holder."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootstrap.lock import table_lock
from cdc_lake.exceptions import BootstrapBusyError, StateStoreError


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/state.db", "sqlite://"])
def test_second_holder_is_refused_until_the_first_lets_go(tmp_path: Path, url: str) -> None:
    state_url = url.format(tmp=tmp_path)

    busy = r"table src\.s\.t: another bootstrap of this table is running"
    with table_lock(state_url, "src.s.t"):
        with pytest.raises(BootstrapBusyError, match=busy), table_lock(state_url, "src.s.t"):
            pass
        with table_lock(state_url, "src.s.other"):
            pass
    with table_lock(state_url, "src.s.t"):
        pass


def test_unsupported_state_store_backends_say_so() -> None:
    with pytest.raises(StateStoreError, match="offers no lock"), table_lock("oracle://u@h/db", "src.s.t"):
        pass
