"""The `offline_rl` stage."""
