"""The `annotate` stage."""
