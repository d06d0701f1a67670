"""Privileged teachers: scripted per world, or LLM-backed; one interface and one factory."""

from leap_kalm.teachers.base import CorrectionError, Teacher, validate_correction
from leap_kalm.teachers.factory import TeacherParams, make_teacher

__all__ = ["CorrectionError", "Teacher", "TeacherParams", "make_teacher", "validate_correction"]
