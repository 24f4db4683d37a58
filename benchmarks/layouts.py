"""The lake layouts the benchmarks compare, as ``lake:`` config settings, by name.

Table version 9 (not the default 6) everywhere: the benchmarks read each commit's completion time from
the timeline's file names (``<instant>_<completion>.commit``), which version 6 does not write.

- ``default``: COPY_ON_WRITE + GLOBAL_BLOOM, the product's default.
- ``cow-ri``: COPY_ON_WRITE + the record-level index.
- ``mor-ri``: MERGE_ON_READ + the record-level index, compaction inside the writer every 5 delta commits.
- ``mor-ri-async``, ``mor-bucket-async``: MERGE_ON_READ + the record-level index or the bucket index, the
  compaction planned every 5 delta commits by the writer and executed outside its writes (``run``'s
  table-service thread, ``cdc-lake compact``).  The record-index layout sets the small-file limit to 0:
  otherwise Hudi merges an update of a file group it counts as small into a new base file (a rewrite,
  not a log append) when the index cannot index log files.
- ``mor-bucket-bounded``: ``mor-bucket-async`` with a plan also after 120 s without one
  (``max_delta_seconds``): the read-optimized staleness bound of issue 35 goal 4 (at most 5 minutes);
  the product's tier-0 default since (``cdc_lake.config.lake.TIER0_LAYOUT``).
- ``mor-bucket-one-group``: ``mor-bucket-bounded`` with plans of one file group each (``plan_io_mb: 1``:
  a file group of a 1M-row table reads and writes more than 1 MB), so a compaction holds one core.
- ``mor-bucket-job``: ``mor-bucket-one-group`` with the plans executed only by a ``cdc-lake compact
  --every`` process beside ``run`` (``executor: job``; the freshness benchmark starts it at a lower CPU
  priority), under Hudi's file-system lock provider, which two processes on one local lake share
  (retried every 200 ms, not Hudi's 5 s).
- ``mor-bucket-timed``: the same planned by time only (every 120 s; 1,000 delta commits never come
  first at tier 0's commit rate): fewer compactions beside the writer.

Each sets ``tier_layouts: {}``, so the layout named is the one every table gets, tier 0 included.
"""

from __future__ import annotations

from typing import Any

_FILE_SYSTEM_LOCK = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
_ASYNC = {"inline": False, "max_delta_commits": 5, "check_seconds": 5}

_LAYOUTS: dict[str, dict[str, Any]] = {
    "default": {"table_type": "COPY_ON_WRITE", "index": "GLOBAL_BLOOM", "table_version": 9},
    "cow-ri": {"table_type": "COPY_ON_WRITE", "index": "RECORD_INDEX", "table_version": 9},
    "mor-ri": {"table_type": "MERGE_ON_READ", "index": "RECORD_INDEX", "table_version": 9},
    "mor-ri-async": {
        "table_type": "MERGE_ON_READ", "index": "RECORD_INDEX", "table_version": 9,
        "compaction": _ASYNC,
        "format_options": {"hoodie.parquet.small.file.limit": "0"},
    },
    "mor-bucket-async": {
        "table_type": "MERGE_ON_READ", "index": "BUCKET", "table_version": 9, "compaction": _ASYNC,
    },
    "mor-bucket-bounded": {
        "table_type": "MERGE_ON_READ", "index": "BUCKET", "table_version": 9,
        "compaction": {**_ASYNC, "max_delta_seconds": 120},
    },
    "mor-bucket-one-group": {
        "table_type": "MERGE_ON_READ", "index": "BUCKET", "table_version": 9,
        "compaction": {**_ASYNC, "max_delta_seconds": 120, "plan_io_mb": 1},
    },
    "mor-bucket-job": {
        "table_type": "MERGE_ON_READ", "index": "BUCKET", "table_version": 9,
        "compaction": {**_ASYNC, "max_delta_seconds": 120, "plan_io_mb": 1, "executor": "job"},
        "format_options": {
            "hoodie.write.lock.provider": _FILE_SYSTEM_LOCK,
            "hoodie.write.lock.filesystem.expire": "1",
            # Hudi's lock manager retries every 5 s by default: a commit that finds the job's lock
            # would wait that long.
            "hoodie.write.lock.client.wait_time_ms_between_retry": "200",
            "hoodie.write.lock.client.num_retries": "300",
        },
    },
    "mor-bucket-timed": {
        "table_type": "MERGE_ON_READ", "index": "BUCKET", "table_version": 9,
        "compaction": {**_ASYNC, "max_delta_commits": 1000, "max_delta_seconds": 120},
    },
}

LAYOUTS: dict[str, dict[str, Any]] = {name: {**lake, "tier_layouts": {}} for name, lake in _LAYOUTS.items()}
