"""The `ingest` stage."""
