"""Kedro pipelines, one package per stage."""
