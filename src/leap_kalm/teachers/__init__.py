"""Privileged teachers: scripted per environment, or LLM-backed; one interface for both."""

from leap_kalm.teachers.base import CorrectionError, Teacher, validate_correction

__all__ = ["CorrectionError", "Teacher", "validate_correction"]
