"""Privileged teachers: scripted per world, or LLM-backed; one interface and one factory."""

from leap_kalm.teachers.base import CorrectionError, Teacher, validate_correction
from leap_kalm.teachers.factory import (
    GuardedTeacher,
    TeacherParams,
    make_guarded_teacher,
    make_teacher,
)

__all__ = [
    "CorrectionError",
    "GuardedTeacher",
    "Teacher",
    "TeacherParams",
    "make_guarded_teacher",
    "make_teacher",
    "validate_correction",
]
