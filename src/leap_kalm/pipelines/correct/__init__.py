"""The `correct` stage."""
