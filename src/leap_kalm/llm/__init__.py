"""LLM layer: models (registry, hardware, embedded/tiny, loading), the sentence encoder,
generation, prompts, parsing, the student policy and the OpenAI-compatible client."""
