"""The live service against its own OpenAPI document: schemathesis generates requests for every
documented operation from the document the running gunicorn serves (its fuzzing phase, valid and
invalid inputs, and its coverage phase, undocumented methods among them), sends them with an
admin API client's token, and checks each answer (no 5xx; status code, content type, headers and
body as documented; a 405 with `Allow`).

Every operation means the document's own count: `schemathesis.openapi.from_url` leaves out the
operation that served the document (`GET /api/v1/openapi.json`), so the served document is
fetched and loaded with `from_dict`, and the operations run are compared with the ones the
document lists, by name."""

from __future__ import annotations

import hashlib
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import BaseSchema, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)
from schemathesis.core import NotSet
from schemathesis.generation.case import Case
from schemathesis.schemas import APIOperation
from sqlalchemy.engine import Engine

from bot.store.clients import Scope, create_client
from tests.e2e.figures import record
from tests.gunicorn import WebProcess, served_gitlab, web_process

log = logging.getLogger(__name__)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    missing_required_header,
    unsupported_method,
    ignored_auth,
]
#: Generated cases per operation (valid and invalid inputs alike), by how much each takes in.
CASES = {"createChange": 400, "listChanges": 100}
CASES_ELSE = 50
Send = Callable[[Case], requests.Response]
#: At least this many requests in all, whatever hypothesis deduplicates.
AT_LEAST = 500
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@dataclass
class Live:
    """The web process and the token of the admin client the requests are sent with."""

    web: WebProcess
    token: str

    @property
    def url(self) -> str:
        """The web process's base URL."""
        return self.web.url


@pytest.fixture
def live(db: Engine) -> Iterator[Live]:
    """The Procfile's web process on the suite's database, with an admin API client (no shared
    GITOPS_API_TOKEN) and secrets, and a GitLab double to read target branches from (most
    generated projects do not exist there: 422 `project_not_found`, as documented)."""
    _, token = create_client(db, "schemathesis", {Scope.ADMIN})
    with (
        served_gitlab() as gitlab,
        web_process(
            {
                "GITOPS_DATABASE_URL": db.url.render_as_string(hide_password=False),
                "GITOPS_WEBHOOK_SECRET": "schemathesis-hook-secret",
                **gitlab,
                "WEB_CONCURRENCY": "1",
                "GITOPS_WEB_THREADS": "2",
            }
        ) as web,
    ):
        yield Live(web, token)


def _run(operation: APIOperation, mode: GenerationMode, examples: int, send: Send) -> None:
    """Up to `examples` generated cases of one operation, each sent and checked."""
    # schemathesis also draws from the `random` module, outside hypothesis's seeded draws: a
    # fixed seed makes the run the same whatever ran before it in the process
    before = random.getstate()
    random.seed(f"{operation.label} {mode.value}")
    try:
        _check(operation, mode, examples, send)
    except Unsatisfiable:  # nothing to make invalid: an operation without parameters or body
        if mode is GenerationMode.POSITIVE or operation.body or operation.query:
            raise
    finally:
        random.setstate(before)


def _cover(schema: BaseSchema, operation: APIOperation, send: Send) -> None:
    """schemathesis's coverage phase (no randomness): each parameter and field at its edges,
    missing, of the wrong type, and the methods the path does not serve (405 with `Allow`)."""
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    config = schema.config.generation_for(operation=operation)
    for case in schema.iter_coverage_cases(
        operation, generation_modes=modes, generation_config=config
    ):
        case.validate_response(send(case), checks=CHECKS)


def _check(operation: APIOperation, mode: GenerationMode, examples: int, send: Send) -> None:
    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: Case) -> None:
        case.validate_response(send(case), checks=CHECKS)

    check()


#: Headers that frame the HTTP message rather than say anything to the API: a generated value
#: (`content-length: b`) is refused by gunicorn with its own 400 before the app sees the request.
FRAMING = {"content-length", "transfer-encoding"}


def _unframed(case: Case) -> None:
    """The case without generated framing headers (requests computes Content-Length itself)."""
    for header in [h for h in case.headers or {} if h.lower() in FRAMING]:
        del case.headers[header]


def _name(path: str, method: str, operation: dict[str, Any]) -> str:
    return str(operation.get("operationId") or f"{method.upper()} {path}")


def documented(document: dict[str, Any]) -> set[str]:
    """Every operation the document lists, by name (its operationId, else method and path)."""
    return {
        _name(path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in _METHODS
    }


def test_the_live_api_answers_as_its_document_says(live: Live) -> None:
    """Hundreds of generated requests over every documented operation, the document's own route
    among them: no server error and no answer the document does not describe."""
    session = requests.Session()
    served = session.get(f"{live.url}/api/v1/openapi.json", timeout=30)
    assert served.status_code == 200, served.text
    document = served.json()
    schema = schemathesis.openapi.from_dict(document)
    sent: Counter[str] = Counter()
    # of the requests sent: the same from run to run of the same tests in one process (what ran
    # before it in the process still moves it: a different, equally fixed, set of requests)
    digest = hashlib.sha256()
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in operations:
        name = _name(operation.path, operation.method, operation.definition.raw)

        def send(case: Case, name: str = name) -> requests.Response:
            sent[name] += 1
            _unframed(case)
            body = None if isinstance(case.body, NotSet) else case.body
            digest.update(repr((case.method, case.formatted_path, case.query, body)).encode())
            return case.call(
                base_url=live.url,
                session=session,
                headers={"Authorization": f"Bearer {live.token}"},
                timeout=30,
            )

        examples = CASES.get(name, CASES_ELSE) // 2
        _run(operation, GenerationMode.POSITIVE, examples, send)
        _run(operation, GenerationMode.NEGATIVE, examples, send)
        _cover(schema, operation, send)
    log.info(
        "schemathesis: %d requests (digest %s): %s",
        sum(sent.values()),
        digest.hexdigest()[:12],
        dict(sent),
    )
    record("schemathesis: requests to the live API, 0 failing", sum(sent.values()), "requests")
    record("schemathesis: operations covered", len(sent), "operations")
    assert sum(sent.values()) >= AT_LEAST, sent
    # each operation the document lists was run and sent requests (none left out by the loader)
    assert set(sent) == documented(document), sorted(documented(document) ^ set(sent))
    assert len(operations) == len(documented(document)) == len(sent)
    assert "openapi" in sent
