"""``benchmarks/process_cpu.py``: CPU seconds per part of the machine, by session, over a stretch of time."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from process_cpu import Sample, cpu_between, label, sample, service_of


def _here_seconds(figures: dict[str, object]) -> float:
    """The CPU seconds ``cpu_between`` counted under this test's session (named ``here``)."""
    by_process = figures["by_process"]
    assert isinstance(by_process, dict)
    return sum(seconds for name, seconds in by_process.items() if name.startswith("here"))


def test_a_session_is_named_by_its_leaders_command_line_or_by_the_caller() -> None:
    postgres = "/usr/lib/postgresql/15/bin/postgres -D /w/.cdc-lake/stack/postgres/primary -c ssl=on"
    assert service_of(postgres) == "postgres-primary"
    assert label("postgres", postgres, None) == "postgres-primary"  # a backend of the primary
    assert label("java", "/usr/bin/java -cp x org.apache.kafka.connect.cli.ConnectDistributed c", None) == (
        "kafka-connect"
    )
    assert label("java", "/usr/bin/java -cp x kafka.Kafka server.properties", None) == "kafka"
    assert label("java", "/usr/bin/python3 -m cdc_lake run", "run") == "run (java)"
    assert label("python3", "/usr/bin/python3 -m cdc_lake run", "run") == "run (python3)"
    assert label("pgbench", "/usr/bin/python3 freshness_bench.py", "benchmark") == "pgbench"
    assert label("sh", "/opt/tool/bin/mystery --flag", None) == "mystery"


def test_seconds_are_counted_from_each_process_start_within_the_stretch() -> None:
    before = Sample(
        {(1, 10): ("kafka", 100.0), (2, 20): ("run (java)", 50.0), (3, 30): ("gone", 9.0)}, 1000.0
    )
    after = Sample(
        {(1, 10): ("kafka", 130.0), (2, 20): ("run (java)", 450.0), (4, 40): ("run (java)", 5.0),
         (2, 99): ("pgbench", 0.05)},
        1500.0,
    )
    figures = cpu_between(before, after)
    assert figures == {
        "busy_seconds": 500.0,
        "accounted": 0.87,
        "by_process": {"run (java)": 405.0, "kafka": 30.0},
    }
    assert list(figures["by_process"]) == ["run (java)", "kafka"]  # type: ignore[call-overload]


def test_this_machines_processes_are_read_with_this_session_named() -> None:
    before = sample({os.getsid(0): "here"})
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    figures = cpu_between(before, sample({os.getsid(0): "here"}))
    here = _here_seconds(figures)
    assert here >= 0.2, figures
    assert figures["busy_seconds"] >= here  # type: ignore[operator]


def test_a_child_that_ended_counts_under_the_parent_that_waited_for_it() -> None:
    before = sample({os.getsid(0): "here"})
    burn = "import time\nt = time.process_time() + 0.4\nwhile time.process_time() < t: pass"
    subprocess.run([sys.executable, "-c", burn], check=True, start_new_session=True)
    figures = cpu_between(before, sample({os.getsid(0): "here"}))
    here = _here_seconds(figures)
    assert here >= 0.4, figures
