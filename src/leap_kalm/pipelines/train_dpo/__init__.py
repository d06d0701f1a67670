"""The `train_dpo` stage."""
