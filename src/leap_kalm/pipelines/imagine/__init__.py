"""The `imagine` stage."""
