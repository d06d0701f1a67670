"""The `evaluate` stage."""
