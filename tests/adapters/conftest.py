"""The GitLab double most adapter tests read: one project with one file, the author bot a
Maintainer of it, mounted on `responses` (a module may define its own `double`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from sim.gitlab import GitLabDouble

URL = "https://gitlab.example.com"
PROJECT = "platform/config"


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A GitLab with one project and the author bot, mounted on responses."""
    gl = GitLabDouble(URL, mode="new")
    gl.add_project(PROJECT, files={"config/prod.yaml": "replicas: 1\n"})
    gl.add_user("gitops-bot", token="author-token", access={PROJECT: 40})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gl.mount(rsps, base_url=URL)
        yield gl
