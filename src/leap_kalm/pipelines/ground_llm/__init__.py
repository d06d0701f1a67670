"""The `ground_llm` stage."""
