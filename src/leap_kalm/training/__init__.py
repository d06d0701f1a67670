"""Thin wrappers over trl, peft and d3rlpy: build config, build trainer, train, save."""
