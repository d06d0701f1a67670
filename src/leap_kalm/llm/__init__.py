"""LLM layer: model registry and loading, generation, prompts, parsing, API client."""
