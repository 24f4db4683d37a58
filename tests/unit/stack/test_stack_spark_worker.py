"""The stack's Spark worker counts as healthy only with its UI on its own port.

Spark moves a UI to the next free port when another process holds the configured one; the worker then
registers ALIVE at the master, but ``worker_status`` (``/json/`` on the configured port) reads the other
process's page (a rehearsal's standalone test failed with ``KeyError: 'executors'`` that way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc_lake.stack.service import StackLayout
from cdc_lake.stack.spark import SparkMaster, SparkWorker


class _Master(SparkMaster):
    def __init__(self, layout: StackLayout, workers: list[dict[str, Any]]) -> None:
        super().__init__(layout)
        self.workers = workers

    def cluster_status(self) -> dict[str, Any]:
        return {"status": "ALIVE", "workers": self.workers}


def test_a_worker_whose_ui_moved_to_another_port_is_not_healthy(tmp_path: Path) -> None:
    layout = StackLayout(tmp_path / "stack")
    port = layout.ports.spark_worker_ui

    def worker(ui_port: int) -> SparkWorker:
        alive = {"state": "ALIVE", "webuiaddress": f"http://localhost:{ui_port}"}
        return SparkWorker(layout, _Master(layout, [alive]))

    assert worker(port).healthy()
    assert not worker(port + 1).healthy()
