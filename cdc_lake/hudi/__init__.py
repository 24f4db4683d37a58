"""Hudi tables: the spec and writer options, writes, reads and removal, the commit timeline and table
properties.  Every call into Hudi's JVM API is made here.

The modules are imported by name (``cdc_lake.hudi.options``, ``.timeline``, ``.writer``) and this
package re-exports nothing: :mod:`cdc_lake.hudi.options` needs no Spark, so the config (which checks
passthrough ``hoodie.*`` options against it) and the command line load without pyspark.
"""
