"""POST /api/v1/changes: both flows, validation, in-progress, idempotency, overload, queue down."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.store.flags import set_flag
from bot.store.models import AUDIT, OPERATIONS
from tests.api import PUBLIC_URL, Api, change_body
from tests.builders import binding_state, count, operation


@pytest.fixture
def api(db: Engine) -> Api:
    """The app on the test database, allowed paths `config/` and `deploy/values.yaml`."""
    return Api.build(db)


def _operations(engine: Engine) -> int:
    return count(engine, OPERATIONS)


def _fire_count(event: str, outcome: str) -> float:
    value = REGISTRY.get_sample_value("gitops_fire_total", {"event": event, "outcome": outcome})
    return value or 0.0


# -- accepted -------------------------------------------------------------------------------------


def test_accepted_change_is_recorded_and_driven(api: Api) -> None:
    """A valid request answers 202 with its id and status URL, is recorded and enqueued."""
    response = api.submit(change_body(subject_id="billing"))
    assert response.status_code == 202
    body = response.json
    assert body is not None
    op_id = body["operation_id"]
    assert body["status_url"] == f"{PUBLIC_URL}/api/v1/changes/{op_id}"
    assert response.headers["Location"] == body["status_url"]
    op = operation(api.engine, op_id)
    assert op["subject_id"] == "billing"
    assert op["requested_by"] == "alice"
    assert op["files"] == [{"path": "config/prod.yaml", "content": "replicas: 3\n"}]
    assert api.queue.enqueued == [("jobs.drive.drive", (op_id,), f"drive:{op_id}")]
    with api.engine.connect() as conn:
        audit = conn.execute(select(AUDIT).where(AUDIT.c.operation_id == op_id)).one()
    assert (audit.source, audit.actor) == ("api", "alice via GITOPS_API_TOKEN")
    assert op["api_client"] == "GITOPS_API_TOKEN"


def test_flow_follows_the_flag_per_request(api: Api) -> None:
    """Flipping workflow.order between two requests gives each the flow in force when it came."""
    first = api.submit(change_body()).json
    set_flag(api.engine, "workflow.order", Flow.MR_FIRST)
    second = api.submit(change_body()).json
    assert first is not None
    assert second is not None
    assert operation(api.engine, first["operation_id"])["flow"] == Flow.APPROVE_FIRST
    assert binding_state(api.engine, first["operation_id"]) is S.APPROVAL_SENDING
    assert operation(api.engine, second["operation_id"])["flow"] == Flow.MR_FIRST
    assert binding_state(api.engine, second["operation_id"]) is S.MR_CREATING


def test_paths_are_stored_normalised_and_deletes_kept(api: Api) -> None:
    """`./config/./a.yaml` is stored as `config/a.yaml`; a delete entry keeps its action."""
    files = [
        {"path": "./config/./a.yaml", "content": "a: 1\n"},
        {"path": "config/old.yaml", "action": "delete"},
    ]
    response = api.submit(change_body(files=files))
    assert response.status_code == 202, response.json
    assert response.json is not None
    assert operation(api.engine, response.json["operation_id"])["files"] == [
        {"path": "config/a.yaml", "content": "a: 1\n"},
        {"path": "config/old.yaml", "action": "delete"},
    ]


def test_any_safe_path_when_no_prefix_is_configured(db: Engine) -> None:
    """With GITOPS_ALLOWED_PATHS unset any safe relative path is accepted."""
    api = Api.build(db, allowed_paths=())
    files = [{"path": "anywhere/deep/file.txt", "content": "x"}]
    assert api.submit(change_body(files=files)).status_code == 202


def test_null_description_counts_as_absent(api: Api) -> None:
    """`description: null` is accepted as no description."""
    response = api.submit(change_body(description=None) | {"description": None})
    assert response.status_code == 202
    assert response.json is not None
    assert operation(api.engine, response.json["operation_id"])["description"] == ""


# -- refused before anything is written -----------------------------------------------------------

_BIG = "x" * (512 * 1024 + 1)

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("missing subject", change_body(subject_id=None), "subject_id"),
    ("missing target", change_body(target_key=None), "target_key"),
    ("missing project", change_body(project=None), "project"),
    ("missing branch", change_body(target_branch=None), "target_branch"),
    ("missing title", change_body(title=None), "title"),
    ("missing files", change_body(files=None), "files"),
    ("unknown field", change_body(flow="mr_first"), "flow"),
    ("subject a number", change_body(subject_id=7), "subject_id"),
    ("project a list", change_body(project=["a"]), "project"),
    ("title an object", change_body(title={"a": 1}), "title"),
    ("description a bool", change_body(description=True), "description"),
    ("id too long", change_body(subject_id="s" * 256), "subject_id"),
    ("id with a space", change_body(subject_id="my service"), "subject_id"),
    ("id starting with a dash", change_body(target_key="-rf"), "target_key"),
    ("id with a quote", change_body(requested_by="a'b"), "requested_by"),
    ("id with unicode", change_body(project="plätform/config"), "project"),
    ("id empty", change_body(subject_id=""), "subject_id"),
    ("branch with ..", change_body(target_branch="release..1"), "target_branch"),
    ("branch .lock", change_body(target_branch="main.lock"), "target_branch"),
    ("branch with //", change_body(target_branch="a//b"), "target_branch"),
    ("branch ending /", change_body(target_branch="main/"), "target_branch"),
    ("title too long", change_body(title="t" * 256), "title"),
    ("title blank", change_body(title="   "), "title"),
    ("title two lines", change_body(title="a\nb"), "title"),
    ("title lone surrogate", change_body(title="a\ud800b"), "title"),
    ("description too big", change_body(description="d" * (64 * 1024 + 1)), "description"),
    ("description with NUL", change_body(description="a\x00b"), "description"),
    ("files an object", change_body(files={"path": "config/a"}), "files"),
    ("files empty", change_body(files=[]), "files"),
    (
        "too many files",
        change_body(files=[{"path": f"config/{i}.yaml", "content": ""} for i in range(101)]),
        "files",
    ),
    ("file a string", change_body(files=["config/a.yaml"]), "files[0]"),
    (
        "file unknown key",
        change_body(files=[{"path": "config/a", "mode": "0755"}]),
        "files[0].mode",
    ),
    ("file path a number", change_body(files=[{"path": 1, "content": ""}]), "files[0].path"),
    ("file without content", change_body(files=[{"path": "config/a"}]), "files[0].content"),
    (
        "file content a number",
        change_body(files=[{"path": "config/a", "content": 1}]),
        "files[0].content",
    ),
    (
        "file action not delete",
        change_body(files=[{"path": "config/a", "action": "update"}]),
        "files[0].action",
    ),
    (
        "file content and delete",
        change_body(files=[{"path": "config/a", "action": "delete", "content": ""}]),
        "files[0]",
    ),
    (
        "file content too big",
        change_body(files=[{"path": "config/a", "content": _BIG}]),
        "files[0].content",
    ),
    (
        "file content with NUL",
        change_body(files=[{"path": "config/a", "content": "\x00"}]),
        "files[0].content",
    ),
]


@pytest.mark.parametrize(("body", "field"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_fields_are_422_naming_the_field(
    api: Api, body: dict[str, Any], field: str
) -> None:
    """Each broken field is refused with 422 invalid naming it, and nothing is recorded."""
    response = api.submit(body)
    assert response.status_code == 422, response.json
    assert response.json is not None
    assert response.json["error"] == "invalid"
    assert response.json["field"] == field
    assert response.json["detail"]
    assert _operations(api.engine) == 0
    assert api.queue.enqueued == []


BAD_PATHS = [
    ("absolute", "/etc/passwd"),
    ("dot-dot", "config/../secrets.yaml"),
    ("dot-dot at the end", "config/.."),
    ("NUL", "config/a\x00.yaml"),
    ("control char", "config/a\x1b.yaml"),
    ("DEL", "config/a\x7f.yaml"),
    ("backslash", "config\\a.yaml"),
    ("empty segment", "config//a.yaml"),
    ("trailing slash", "config/"),
    ("empty", ""),
    ("only dots", "./."),
    ("under .git", "config/.git/hooks/pre-commit"),
    (".git in capitals", "config/.GIT/config"),
    (".git with a trailing dot", "config/.git./config"),
    ("outside prefix", "configs/a.yaml"),
    ("outside prefix at top", "secrets.yaml"),
    ("prefix directory itself", "config"),
    ("bidi override", "config/\u202egnp.yaml"),
]


@pytest.mark.parametrize("path", [p for _, p in BAD_PATHS], ids=[n for n, _ in BAD_PATHS])
def test_bad_paths_are_422_invalid_path(api: Api, path: str) -> None:
    """Each unsafe or disallowed path is refused with 422 invalid_path naming it and why."""
    response = api.submit(change_body(files=[{"path": path, "content": "x"}]))
    assert response.status_code == 422, response.json
    assert response.json is not None
    assert response.json["error"] == "invalid_path"
    assert response.json["path"] == path
    assert response.json["detail"]
    assert _operations(api.engine) == 0


def test_file_allowed_by_an_exact_file_prefix(api: Api) -> None:
    """A prefix without a trailing slash (deploy/values.yaml) allows that file itself."""
    files = [{"path": "deploy/values.yaml", "content": "x"}]
    assert api.submit(change_body(files=files)).status_code == 202


def test_duplicate_paths_are_422(api: Api) -> None:
    """The same path twice, even spelt differently, is refused."""
    files = [
        {"path": "config/a.yaml", "content": "1"},
        {"path": "./config/a.yaml", "action": "delete"},
    ]
    response = api.submit(change_body(files=files))
    assert response.status_code == 422
    assert response.json is not None
    assert response.json["error"] == "invalid_path"
    assert response.json["path"] == "./config/a.yaml"
    assert "more than once" in response.json["detail"]


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b"",
        b"not json",
        b'{"a": NaN}',
        b'{"title": "a", "title": "b"}',
        b"\xff\xfe{}",
        b'{"n": ' + b"9" * 5000 + b"}",
    ],
    ids=["truncated", "empty", "text", "NaN", "duplicate key", "bad UTF-8", "huge integer"],
)
def test_malformed_json_is_400(api: Api, raw: bytes) -> None:
    """A body that is not strict JSON is refused with 400 malformed_json."""
    response = api.call(
        "POST", "/api/v1/changes", data=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json is not None
    assert response.json["error"] == "malformed_json"


@pytest.mark.parametrize("raw", [b"[]", b'"x"', b"3", b"null"])
def test_body_not_an_object_is_422(api: Api, raw: bytes) -> None:
    """JSON that is not an object is refused with 422 invalid on the body."""
    response = api.call("POST", "/api/v1/changes", data=raw)
    assert response.status_code == 422
    assert response.json is not None
    assert (response.json["error"], response.json["field"]) == ("invalid", "body")


@pytest.mark.parametrize("depth", [9, 5000])
def test_nesting_past_the_limit_is_422(api: Api, depth: int) -> None:
    """A body nested deeper than the limit is refused (a very deep one without a 500)."""
    raw = b'{"title": ' + b"[" * depth + b"]" * depth + b"}"
    response = api.call("POST", "/api/v1/changes", data=raw)
    assert response.status_code == 422
    assert response.json is not None
    assert response.json["field"] == "body"


def test_body_over_the_limit_is_413(db: Engine) -> None:
    """A body larger than GITOPS_MAX_BODY_BYTES is refused with 413 before it is parsed."""
    api = Api.build(db, max_body_bytes=2048)
    response = api.submit(change_body(files=[{"path": "config/a", "content": "x" * 4096}]))
    assert response.status_code == 413
    assert response.json is not None
    assert response.json["error"] == "request_entity_too_large"
    assert _operations(api.engine) == 0


# -- in progress ----------------------------------------------------------------------------------


def test_second_request_for_a_busy_binding_is_409_with_the_owner(api: Api) -> None:
    """A request for a subject and target already in progress is refused naming the owner."""
    first = api.submit(change_body(subject_id="billing")).json
    assert first is not None
    response = api.submit(change_body(subject_id="billing", title="Another change"))
    assert response.status_code == 409
    assert response.json is not None
    assert response.json["error"] == "in_progress"
    assert response.json["operation_id"] == first["operation_id"]
    assert _operations(api.engine) == 1


# -- idempotency ----------------------------------------------------------------------------------


def test_same_key_same_body_answers_the_same_202(api: Api) -> None:
    """A repeated Idempotency-Key with the same body gets the same answer and no second row."""
    body = change_body()
    first = api.submit(body, headers={"Idempotency-Key": "k-1"})
    again = api.submit(body, headers={"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 202
    assert first.json == again.json
    assert _operations(api.engine) == 1
    assert first.json is not None
    assert operation(api.engine, first.json["operation_id"])["idempotency_key"] == "k-1"


def test_same_key_other_body_is_422(api: Api) -> None:
    """A repeated Idempotency-Key with a different body is refused as reused."""
    api.submit(change_body(subject_id="a"), headers={"Idempotency-Key": "k-2"})
    response = api.submit(change_body(subject_id="b"), headers={"Idempotency-Key": "k-2"})
    assert response.status_code == 422
    assert response.json is not None
    assert response.json["error"] == "idempotency_key_reused"
    assert _operations(api.engine) == 1


def test_request_hash_is_the_canonical_body_hash(api: Api) -> None:
    """The stored hash is sha256 of the sorted, compact JSON of the body as sent."""
    import hashlib
    import json

    body = change_body()
    response = api.submit(body, headers={"Idempotency-Key": "k-3"})
    assert response.json is not None
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    stored = operation(api.engine, response.json["operation_id"])["request_hash"]
    assert stored == hashlib.sha256(canonical).hexdigest()


@pytest.mark.parametrize("key", ["has space", "", "k" * 256, "tab\there"])
def test_bad_idempotency_key_is_422(api: Api, key: str) -> None:
    """An Idempotency-Key that is empty, too long or not printable ASCII is refused."""
    response = api.submit(change_body(), headers={"Idempotency-Key": key})
    assert response.status_code == 422
    assert response.json is not None
    assert response.json["field"] == "Idempotency-Key"


def test_key_race_loser_finds_the_winner(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the first look-up misses a twin that commits meanwhile, the answer is still its 202."""
    import bot.app.submit

    body = change_body()
    first = api.submit(body, headers={"Idempotency-Key": "k-race"}).json
    real = bot.app.submit.operation_by_idempotency_key
    calls: list[str] = []

    def late(engine: Engine, key: str) -> Any:
        calls.append(key)
        return None if len(calls) == 1 else real(engine, key)

    monkeypatch.setattr(bot.app.submit, "operation_by_idempotency_key", late)
    second = api.submit(body, headers={"Idempotency-Key": "k-race"})
    assert second.status_code == 202
    assert second.json == first
    assert len(calls) == 2
    assert _operations(api.engine) == 1


def test_identical_requests_at_once_make_one_operation(api: Api) -> None:
    """Two identical keyed requests sent together both get 202 for one and the same operation."""
    body = change_body()
    barrier = threading.Barrier(2)
    answers: list[tuple[int, Any]] = []

    def send() -> None:
        client = api.app.test_client()
        barrier.wait()
        response = client.post(
            "/api/v1/changes",
            json=body,
            headers={"Authorization": "Bearer t", "Idempotency-Key": "k-twins"},
        )
        answers.append((response.status_code, response.json))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [status for status, _ in answers] == [202, 202]
    assert answers[0][1] == answers[1][1]
    assert _operations(api.engine) == 1


# -- overload and a queue that is down ------------------------------------------------------------


def test_overloaded_request_is_recorded_as_failed_and_503(api: Api) -> None:
    """At the queue bound the request is written as CREATE_FAILED/CREATE_OVERLOADED and 503."""
    set_flag(api.engine, "queue.max_length", 5)
    api.queue.waiting = 5
    before = _fire_count("overloaded", "success")
    response = api.submit(change_body())
    assert response.status_code == 503
    assert response.json is not None
    assert response.json["error"] == "overloaded"
    op_id = response.json["operation_id"]
    assert binding_state(api.engine, op_id) is S.CREATE_FAILED
    assert operation(api.engine, op_id)["step"] == Step.CREATE_OVERLOADED
    assert _fire_count("overloaded", "success") == before + 1
    assert api.queue.drives() == []
    assert response.headers["Retry-After"]


def test_just_under_the_bound_is_accepted(api: Api) -> None:
    """One job below the bound the request is accepted as usual."""
    set_flag(api.engine, "queue.max_length", 5)
    api.queue.waiting = 4
    assert api.submit(change_body()).status_code == 202


def test_overloaded_then_repeated_with_its_key_is_retried_when_room(api: Api) -> None:
    """Repeating an overloaded request's key gets 503 while full, then a retried 202."""
    set_flag(api.engine, "queue.max_length", 1)
    api.queue.waiting = 1
    body = change_body()
    first = api.submit(body, headers={"Idempotency-Key": "k-busy"})
    still = api.submit(body, headers={"Idempotency-Key": "k-busy"})
    assert first.status_code == still.status_code == 503
    assert first.json is not None
    op_id = first.json["operation_id"]
    api.queue.waiting = 0
    later = api.submit(body, headers={"Idempotency-Key": "k-busy"})
    assert later.status_code == 202
    assert later.json is not None
    assert later.json["operation_id"] == op_id
    assert binding_state(api.engine, op_id) is S.APPROVAL_SENDING
    assert api.queue.drives() == [op_id]
    assert _operations(api.engine) == 1


def test_queue_down_still_202_and_recorded(api: Api) -> None:
    """With the queue down (length and enqueue fail) the request is still accepted and stored."""
    api.queue.down = True
    response = api.submit(change_body())
    assert response.status_code == 202
    assert response.json is not None
    assert binding_state(api.engine, response.json["operation_id"]) is S.APPROVAL_SENDING
    assert api.queue.enqueued == []
