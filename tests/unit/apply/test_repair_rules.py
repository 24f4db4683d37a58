"""The repair's decisions that need no Spark: which stored rows go before its batch, which tables the
applier leaves alone after an interrupted repair, and how keys travel through ``validate --json``.

The removal rule is what makes a repair exact against a corrupted row: Hudi's event-time merge keeps a
stored row whose ordering value is above the incoming one, so such a row, and a live row of a key the
source no longer holds, must be removed first.  ``tests/unit/apply/test_apply_model.py``
(``test_a_repair_without_the_removal_fails_the_model``) shows the suite failing without it.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest
from support.schedule import tier_target

from cdc_lake.apply.repair import interrupted_repair, must_remove
from cdc_lake.apply.runner import skip_reason
from cdc_lake.exceptions import BootstrapError
from cdc_lake.lake.applier import RepairRows
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import LockPurpose, table_lock, waited_table_lock
from cdc_lake.state.store import StateStore
from cdc_lake.validation import ValidateResult, json_key
from cdc_lake_bootstrap.repair import keys_of_validation, read_keys_file

HIGH, LOW, SNAPSHOT = "9" * 40, "0" * 39 + "1", "0" * 40


@pytest.mark.parametrize(
    ("stored", "live", "final", "removed"),
    [
        (HIGH, True, SNAPSHOT, True),  # a stray row above the batch's row: Hudi would keep it
        (HIGH, True, LOW, True),
        (LOW, True, LOW, False),  # equal: Hudi takes the incoming row
        (LOW, True, HIGH, False),  # the batch's row wins by itself
        (LOW, True, None, True),  # the source does not hold the key: its live row goes
        (LOW, False, None, False),  # a soft-deleted row of a key the source does not hold stays
        (HIGH, False, LOW, True),  # a soft-deleted row the batch's row would lose to
    ],
)
def test_must_remove(stored: str, live: bool, final: str | None, removed: bool) -> None:
    assert must_remove(stored, live, final) is removed


def test_an_interrupted_repair_keeps_the_applier_away_until_it_is_resumed(tmp_path: Path) -> None:
    with StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as store:
        store.upsert_source("src", "postgres")
        store.upsert_table("src.public.t", "src", 0, str(tmp_path / "lake"))
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            store.transition("src.public.t", state)
        target = tier_target("src.public.t", 0)
        assert skip_reason(store, target) is None
        store.transition("src.public.t", TableState.FAILED, "a batch failed")
        assert skip_reason(store, target) is None, "a FAILED table is retried"
        why = interrupted_repair("src.public.t", RepairRows(("id",), ((1,), (2,)), (), {}, "0/16B3748", 0))
        store.transition("src.public.t", TableState.FAILED, why)
        assert skip_reason(store, target) == why
    assert why.endswith("run cdc-lake repair src.public.t --resume")


def test_validate_json_keys_read_back_as_repair_keys(tmp_path: Path) -> None:
    """Keys of every JSON-less type print as text ``repair`` casts back; ``lake_rows`` is not a key."""
    at = dt.datetime(2024, 1, 1, 12, 0, 0, 123475, tzinfo=dt.UTC)
    result = ValidateResult(
        "s.public.t",
        missing=[{"id": 1, "at": at}],
        extra=[{"id": 2, "at": at}],
        different=[{"id": 3, "at": at}],
        duplicate=[{"id": 4, "at": at, "lake_rows": 2}],
        missing_count=1, extra_count=1, different_count=1, duplicate_count=1,
    )
    printed = json.dumps([result.to_json()])  # what `validate --json` prints: no TypeError
    path = tmp_path / "differs.json"
    path.write_text(printed, encoding="utf-8")
    keys = read_keys_file(path, "s.public.t")
    assert keys == [{"id": i, "at": "2024-01-01T12:00:00.123475+00:00"} for i in (1, 2, 3, 4)]
    assert read_keys_file(path, "s.public.other") == []
    assert keys_of_validation(json.loads(printed)) == {"s.public.t": keys}


def test_json_key_values() -> None:
    assert json_key({"d": dt.date(2024, 2, 29), "n": Decimal("1.50"), "b": b"\x00\xff", "f": float("nan"),
                     "i": float("-inf"), "s": "x", "k": 7}) == {
        "d": "2024-02-29", "n": "1.50", "b": "00ff", "f": "NaN", "i": "-Infinity", "s": "x", "k": 7,
    }


@pytest.mark.parametrize("text", ["{}", '{"a": 1}', "[1, 2]", "not json"])
def test_a_keys_file_that_is_neither_form_is_refused_in_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "keys.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BootstrapError, match=f"--keys {path}") as caught:
        read_keys_file(path, "s.public.t")
    assert "\n" not in str(caught.value)


def test_a_repair_waits_for_the_apply_lock_a_batch_holds(tmp_path: Path) -> None:
    """``run`` holds the table's apply lock for each batch: the repair takes it between two, and gives up
    (false) only once it stayed held for the whole wait.  Before, the repair failed at once beside a
    running ``run`` (benchmarks/repair_bench.py: 'another process is applying it')."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    release = threading.Event()

    def batch() -> None:
        with table_lock(url, LockPurpose.APPLY, "s.t") as lock:
            assert lock
            release.wait(10)

    holder = threading.Thread(target=batch)
    holder.start()
    time.sleep(0.3)
    with waited_table_lock(url, LockPurpose.APPLY, "s.t", 0.3) as lock:
        assert not lock
    threading.Timer(0.3, release.set).start()
    with waited_table_lock(url, LockPurpose.APPLY, "s.t", 10) as lock:
        assert lock
    holder.join()


def test_a_validate_output_that_lists_fewer_keys_than_it_counts_is_refused(tmp_path: Path) -> None:
    """``validate`` lists at most ``--max-keys`` keys of each kind (20 by default): repairing only those
    would leave the rest and say nothing (benchmarks/repair_bench.py: 100 corrupted keys, 56 left after a
    repair of a default validate's output)."""
    result = ValidateResult(
        "s.public.t", missing=[{"id": i} for i in range(20)], missing_count=50, source_rows=50
    )
    path = tmp_path / "differs.json"
    path.write_text(json.dumps([result.to_json()]), encoding="utf-8")
    with pytest.raises(BootstrapError, match=r"lists 20 of the 50 missing keys of s\.public\.t") as caught:
        read_keys_file(path, "s.public.t")
    assert "--max-keys" in str(caught.value) and "\n" not in str(caught.value)


def test_a_dry_run_takes_a_nan_for_equal_to_a_nan() -> None:
    # The dry run compared the source's and the lake's values with Python's ==, for which a NaN differs
    # from itself: a row holding a NaN was always "update".
    from cdc_lake_bootstrap.repair import _same

    assert _same(float("nan"), float("nan"))
    assert _same(1.5, 1.5) and _same(None, None) and _same("a", "a")
    assert not _same(float("nan"), 1.0) and not _same(1.0, float("nan")) and not _same(None, 0)
