"""The `privilege` stage."""
