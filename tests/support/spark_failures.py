"""Spark failures' texts as recorded, for the tests of how a failure is reported (spark, bootstrap)."""

from __future__ import annotations

# What str() of the Py4JJavaError gives when a write fails on a value the conversion refused (recorded:
# pyspark 3.5.7, local mode, a Parquet write; most frames cut).
RAISED = (
    'table pg.public.m: column nfree of the row with key {"id":42} holds a value with more digits than its '
    "lake type decimal(38,18) holds; set column_types: {nfree: string} in the table's config "
    "(docs/type-mapping.md)"
)
RECORDED_JOB_ABORT = (
    "An error occurred while calling o122.parquet.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 "
    "times, most recent failure: Lost task 0.0 in stage 0.0 (TID 0) (192.0.2.2 executor driver): "
    "org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
    "file:/tmp/failures/out.\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError("
    "QueryExecutionErrors.scala:775)\n"
    "\tat java.base/java.lang.Thread.run(Thread.java:840)\n"
    f"Caused by: java.lang.RuntimeException: {RAISED}\n"
    "\tat org.apache.spark.sql.catalyst.expressions.GeneratedClass$SpecificUnsafeProjection.apply(Unknown "
    "Source)\n"
    "Driver stacktrace:\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)\n"
    "Caused by: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
    "file:/tmp/failures/out.\n"
    "\t... 1 more\n"
    f"Caused by: java.lang.RuntimeException: {RAISED}\n"
    "\tat org.apache.spark.sql.catalyst.expressions.GeneratedClass$SpecificUnsafeProjection.apply(Unknown "
    "Source)\n"
)
RECORDED_DROPPED_READ = (
    "An error occurred while calling o398.save.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 4.0 failed 4 "
    "times, most recent failure: Lost task 1.3 in stage 4.0 (TID 17) (127.0.0.1 executor 0): "
    "org.postgresql.util.PSQLException: An I/O error occurred while sending to the backend.\n"
    "\tat org.postgresql.core.v3.QueryExecutorImpl.execute(QueryExecutorImpl.java:395)\n"
)
