"""The telemetry stage: PySpark over the services' exported telemetry, producing
per-bookie load reports and the load factors placement multiplies weights by.

Only `quire telemetry ...` and tests import this package; services never do,
so they never load pyspark.
"""
