"""leap_kalm: LEAP and KALM as Kedro pipelines."""

__version__ = "0.1.0"
