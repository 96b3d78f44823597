"""Data layer: the schema and its inference, reading (CSV, Parquet, DataFrame), the one-pass and
Dask scans, tables and marginals, workloads, exact answers and the bundled tables. Imports the
privacy layer and below."""
