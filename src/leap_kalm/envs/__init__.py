"""Gymnasium-style environments (no Kedro imports)."""
