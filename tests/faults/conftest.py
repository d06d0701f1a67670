"""Fixtures of the fault suite: the project's own catalog (``--env test``) in a copy of
the checkout, so every attack goes through the datasets and paths a real run uses."""

from __future__ import annotations

import os

import pytest

from tests.helpers import copy_project


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("faults") / "project")


@pytest.fixture(scope="module")
def catalog(project):
    """The test environment's catalog, resolved as `kedro run --env test` resolves it."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
    bootstrap_project(project)
    with KedroSession.create(project_path=project, env="test") as session:
        yield session.load_context().catalog
