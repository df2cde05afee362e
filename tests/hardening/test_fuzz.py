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

from bot.ingress.inbox import body_key
from bot.services import Services
from bot.store.models import INBOX
from jobs import context
from jobs import inbox as inbox_job
from tests.ingress.conftest import DEPLOY_SECRET, EVENTS, SECRET, fixture_body

#: Cases per endpoint family; the embedded pass runs the defaults (5,600 in all), the PostgreSQL
#: pass a third of them more; GITOPS_FUZZ_SCALE multiplies.
SCALE = float(
    os.environ.get(
        "GITOPS_FUZZ_SCALE", "0.34" if os.environ.get("GITOPS_TEST_DATABASE_URL") else "1"
    )
)
HOOK_CASES = int(3000 * SCALE)
API_CASES = int(2000 * SCALE)
EDGE_CASES = int(300 * SCALE)

#: Integers at the edges of the database's columns (32-bit project ids and MR iids, 64-bit ids).
EDGES = (0, -1, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**30)
edge_ints = st.sampled_from(EDGES)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | edge_ints
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
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
        context.install(services)
        try:
            assert inbox_job.process(row.id) in {"processed", "stale", "ignored", "quarantined"}
        finally:
            context.uninstall()


def int_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path in a JSON value that holds an integer (ids among them)."""
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            yield from int_paths(child, (*prefix, key))
    elif isinstance(value, int) and not isinstance(value, bool):
        yield prefix


def process_stored(services: Services, delivery_key: str) -> str | None:
    """Processes the stored delivery, as the job does; its status (None: nothing stored)."""
    with services.engine.connect() as conn:
        row = conn.execute(select(INBOX).where(INBOX.c.delivery_key == delivery_key)).first()
    if row is None:
        return None
    context.install(services)
    try:
        return inbox_job.process(row.id)
    finally:
        context.uninstall()


@settings(
    max_examples=EDGE_CASES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_ids_at_and_past_the_columns_edges_end_or_process(
    client: FlaskClient, services: Services, data: st.DataObject
) -> None:
    """Every integer of a handled payload set to a column's edge or past it: answered 2xx, and
    processing either quarantines it with a reason or handles it, never raising (no
    OverflowError, no row that fails in every sweep)."""
    name = data.draw(st.sampled_from(sorted(EVENTS)))
    body = json.loads(BASES[name])
    targets = sorted(int_paths(body), key=repr)
    for path in data.draw(st.lists(st.sampled_from(targets), min_size=1, max_size=3)):
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = data.draw(edge_ints)
    key = uuid.uuid4().hex
    response = client.post(
        "/webhooks/gitlab",
        data=json.dumps(body).encode(),
        headers={"X-Gitlab-Event": EVENTS[name], "X-Gitlab-Token": SECRET, "Idempotency-Key": key},
    )
    assert response.status_code in (200, 202), response.get_data(as_text=True)
    status = process_stored(services, f"gitlab:{key}")
    assert status in {"processed", "stale", "ignored", "quarantined"}


@settings(
    max_examples=EDGE_CASES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    project=st.one_of(edge_ints, edge_ints.map(str), st.sampled_from(["platform/config", ""])),
    mr_iid=st.one_of(edge_ints, st.integers()),
    operation_id=st.none() | st.text(max_size=40) | st.uuids().map(str),
    sha=st.none() | st.sampled_from(["f" * 40, "F" * 40, "f" * 65, "x"]),
)
def test_deploy_callbacks_with_hostile_fields_end_or_process(
    client: FlaskClient,
    services: Services,
    project: object,
    mr_iid: int,
    operation_id: str | None,
    sha: str | None,
) -> None:
    """A deploy callback with any project, MR iid, operation id or SHA is answered 2xx and
    ends quarantined or processed, never raising."""
    fields = {"project_id": project, "mr_iid": mr_iid, "status": "success"}
    fields.update({k: v for k, v in {"operation_id": operation_id, "sha": sha}.items() if v})
    raw = json.dumps(fields).encode()
    response = client.post("/webhooks/deploy", data=raw, headers={"X-Deploy-Token": DEPLOY_SECRET})
    assert response.status_code in (200, 202), response.get_data(as_text=True)
    status = process_stored(services, body_key("deploy", "deploy_callback", raw))
    assert status in {"processed", "stale", "quarantined"}


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
