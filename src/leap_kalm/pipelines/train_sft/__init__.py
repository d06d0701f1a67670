"""The `train_sft` stage."""
