"""The shared SparkSession, configured for Hudi and (optionally) an S3-compatible lake."""

from cdc_lake.spark.session import get_spark, spark_conf, start_spark, stop_spark

__all__ = ["get_spark", "spark_conf", "start_spark", "stop_spark"]
