"""The API's one contract: the generated document is valid OpenAPI, says what the models check,
and the answers it describes (405 with Allow, refusal codes) are the app's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate
from sqlalchemy.engine import Engine

import webhooks.api_models
from tests.api import Api, change_body
from webhooks.api_models import (
    BRANCH_PATTERN,
    DESCRIPTION_PATTERN,
    ID_PATTERN,
    TITLE_PATTERN,
    ChangeRequest,
)
from webhooks.openapi import document

_METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture
def api(db: Engine) -> Api:
    """The app on the test database."""
    return Api.build(db)


def test_the_document_is_valid_openapi(api: Api) -> None:
    """The served document passes openapi-spec-validator (OpenAPI 3.1, its JSON Schema dialect)."""
    served = api.call("GET", "/api/v1/openapi.json", token=None).json
    assert served is not None
    validate(served)
    validate(document(api.app))


def test_the_document_states_the_models_limits(api: Api) -> None:
    """The change request's schema is the model's: required fields, no others, its limits."""
    schemas = document(api.app)["components"]["schemas"]
    request = schemas["ChangeRequest"]
    assert set(request["required"]) == {
        "subject_id",
        "target_key",
        "project",
        "target_branch",
        "title",
        "files",
    }
    assert request["additionalProperties"] is False
    assert request["properties"]["files"]["maxItems"] == webhooks.api_models.MAX_FILES
    assert request["properties"]["subject_id"]["pattern"] == ID_PATTERN
    assert {"FileContent", "FileDelete", "Error", "ChangeView", "QueueList"} <= set(schemas)


def _accepted(field: str, value: Any) -> bool:
    """Whether the model takes `value` for `field` in an otherwise valid change request."""
    body = change_body(**{field: value})
    body.pop("files")
    body["files"] = [{"path": "config/a.yaml", "content": "x"}]
    try:
        ChangeRequest.model_validate(body)
    except ValueError:
        return False
    return True


def _documented(pattern: str, value: str, max_length: int | None = None) -> bool:
    if max_length is not None and not 1 <= len(value) <= max_length:
        return False
    return re.fullmatch(pattern, value) is not None


_BRANCHY = st.text(alphabet="ab1._/@~:-lock", max_size=12) | st.from_regex(ID_PATTERN)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    branch=_BRANCHY,
    title=st.text(max_size=12) | st.sampled_from([" ", "\u3000", "a\x85", "\ta"]),
    description=st.text(max_size=12) | st.sampled_from(["\t\r\n", "\x0b", "\x9f"]),
)
def test_documented_patterns_say_what_the_validators_accept(
    branch: str, title: str, description: str
) -> None:
    """A branch, title or description matches its documented pattern exactly when the model
    accepts it (the validators give the clearer message; the document must agree with them)."""
    assert _documented(BRANCH_PATTERN, branch, 255) == _accepted("target_branch", branch)
    assert _documented(TITLE_PATTERN, title, 255) == _accepted("title", title)
    assert _documented(DESCRIPTION_PATTERN, description) == _accepted("description", description)


def test_a_method_a_path_does_not_serve_is_405_with_allow(api: Api) -> None:
    """Every documented path answers an undocumented method with 405, the JSON error and an
    `Allow` header naming the methods it serves (RFC 9110 15.5.6)."""
    for path, item in document(api.app)["paths"].items():
        documented = {method for method in item if method in _METHODS}
        other = next(m for m in ("delete", "patch", "put") if m not in documented)
        concrete = path.replace("{operation_id}", "abc")
        response = api.call(other.upper(), concrete)
        assert response.status_code == 405, path
        assert response.json is not None
        assert response.json["error"] == "method_not_allowed"
        allowed = {m.strip().lower() for m in response.headers["Allow"].split(",")}
        assert documented <= allowed, path


def test_the_models_refusal_codes_are_documented(api: Api) -> None:
    """Each code the models refuse with (besides `invalid`) is named in the document."""
    source = Path(webhooks.api_models.__file__).read_text()
    codes = set(re.findall(r'"(\w+_path)"', source))
    assert codes == {"invalid_path", "protected_path"}
    text = str(document(api.app))
    assert {code for code in codes if f"`{code}`" not in text} == set()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            change_body(files=[{"path": "config/a.yaml", "content": "x", "mode": "1"}]),
            "files[0].mode",
        ),
        (
            change_body(files=[{"path": "config/a.yaml"}, {"path": "config/b", "action": 1}]),
            "files[0].content",
        ),
        (change_body(files=[{"path": "config/a", "content": "x"}, 7]), "files[1]"),
    ],
)
def test_a_refusal_names_the_field_in_the_api_s_words(
    api: Api, body: dict[str, Any], field: str
) -> None:
    """A model's refusal is the API's 422 naming the field, without pydantic's union tags."""
    response = api.submit(body)
    assert response.status_code == 422
    assert response.json is not None
    assert (response.json["error"], response.json["field"]) == ("invalid", field)
    assert response.json["detail"].startswith(f"{field}: ")
    assert "FileContent" not in response.json["detail"]


@pytest.mark.parametrize("path", ["config/ô.yaml", "config/\U0003eaec", "config/a\u202e.yaml"])
def test_a_refused_path_is_named_as_sent_whatever_its_characters(api: Api, path: str) -> None:
    """A path listed twice (or unsafe) is a 422 naming it exactly as the request spelt it, for
    any Unicode in it (schemathesis found a 500 here with `ô` listed twice)."""
    files = [{"path": path, "action": "delete"}, {"path": path, "content": ""}]
    response = api.submit(change_body(files=files))
    assert response.status_code == 422
    assert response.json is not None
    assert response.json["error"] == "invalid_path"
    assert response.json["path"] == path
