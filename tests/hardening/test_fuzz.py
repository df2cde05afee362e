"""Mutations of the documented payloads thrown at every endpoint: never a 5xx, never an
unhandled exception, every authenticated bad body quarantined with a reason."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from bot.services import Services
from bot.store.models import INBOX
from jobs import inbox as inbox_job
from jobs import runtime
from tests.ingress.conftest import EVENTS, SECRET, fixture_body

#: Cases per endpoint family; CI runs the defaults (5,000 in all), GITOPS_FUZZ_SCALE multiplies.
SCALE = int(os.environ.get("GITOPS_FUZZ_SCALE", "1"))
HOOK_CASES = 3000 * SCALE
API_CASES = 2000 * SCALE

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path in a JSON value."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield (*prefix, key)
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield (*prefix, index)
            yield from paths(child, (*prefix, index))


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    """The base payload with a few keys replaced, removed, or the bytes cut or garbled."""
    kind = draw(st.sampled_from(["replace", "remove", "truncate", "garble", "raw"]))
    if kind == "truncate":
        return base[: draw(st.integers(0, len(base)))]
    if kind == "garble":
        at = draw(st.integers(0, len(base) - 1))
        return base[:at] + draw(st.binary(min_size=1, max_size=8)) + base[at + 1 :]
    if kind == "raw":
        return draw(st.binary(max_size=200))
    data = json.loads(base)
    targets = list(paths(data))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(targets))
        parent = data
        try:
            for key in path[:-1]:
                parent = parent[key]
            if kind == "remove" and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue
    return json.dumps(data).encode()


BASES = {
    name: fixture_body(name) for name in [*EVENTS, "push.json", "note_commit.json", "emoji.json"]
}
HEADERS = {
    **{name: event for name, event in EVENTS.items()},
    "push.json": "Push Hook",
    "note_commit.json": "Note Hook",
    "emoji.json": "Emoji Hook",
}


@settings(
    max_examples=HOOK_CASES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_gitlab_hook_survives_mutated_payloads(
    client: FlaskClient, services: Services, data: st.DataObject
) -> None:
    """Any mutation of a documented payload is 2xx; an unusable one is quarantined with a reason;
    a usable one is processed without an exception."""
    name = data.draw(st.sampled_from(sorted(BASES)))
    body = data.draw(mutated(BASES[name]))
    event = data.draw(st.sampled_from([HEADERS[name], *EVENTS.values()]))
    key = uuid.uuid4().hex
    response = client.post(
        "/webhooks/gitlab",
        data=body,
        headers={"X-Gitlab-Event": event, "X-Gitlab-Token": SECRET, "Idempotency-Key": key},
    )
    assert response.status_code in (200, 202), response.get_data(as_text=True)
    with services.engine.connect() as conn:
        row = conn.execute(select(INBOX).where(INBOX.c.delivery_key == f"gitlab:{key}")).first()
    if response.get_json()["status"] == "quarantined":
        assert row is not None
        assert row.reason
    if response.status_code == 202:
        assert row is not None
        runtime.use(services)
        try:
            assert inbox_job.process(row.id) in {"processed", "stale", "ignored", "quarantined"}
        finally:
            runtime.use(None)


@pytest.fixture
def api_client(services: Services) -> FlaskClient:
    """A test client (the ingress fixture's app) for the REST API."""
    from webhooks import create_app

    return create_app(services=services).test_client()


VALID = {
    "subject_id": "svc",
    "target_key": "config/prod.yaml",
    "project": "platform/config",
    "target_branch": "main",
    "title": "t",
    "requested_by": "alice",
    "files": [{"path": "config/prod.yaml", "content": "x: 1\n"}],
}


@settings(
    max_examples=API_CASES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_api_survives_mutated_bodies(api_client: FlaskClient, data: st.DataObject) -> None:
    """Any mutation of a valid change request gets a 2xx or a 4xx with a JSON error, never 5xx."""
    body = data.draw(mutated(json.dumps({**VALID, "subject_id": uuid.uuid4().hex}).encode()))
    response = api_client.post(
        "/api/v1/changes",
        data=body,
        headers={"Authorization": "Bearer api-token", "Content-Type": "application/json"},
    )
    assert response.status_code < 500, response.get_data(as_text=True)
    if response.status_code >= 400:
        payload = response.get_json()
        assert payload["error"]
        assert payload["detail"]
