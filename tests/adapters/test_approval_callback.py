"""Approval callbacks: signature verification (replay window included) and payload parsing."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.approval import (
    ApprovalCallback,
    Decision,
    MalformedCallback,
    SignatureFault,
    SignatureRejected,
    parse_callback,
    sign,
    verify_signature,
)
from bot.approval.callback import MAX_CALLBACK_BYTES, MAX_DEPTH
from bot.core.states import Flow

SECRET = "approval-shared-secret"
NOW = 1_700_000_000
TS = str(NOW)


def callback_payload(**kw: Any) -> dict[str, Any]:
    """A valid approve-first callback payload; every field can be overridden."""
    values: dict[str, Any] = {
        "request_id": "req-0001",
        "operation_id": "0b9f6c1e-5d4a-4c8e-9a51-3f2d7e8c9b10",
        "approval_id": "apr-1",
        "decision": "approved",
        "ext": {"project": "platform/config"},
    }
    values.update(kw)
    return values


def callback_body(**kw: Any) -> bytes:
    """callback_payload(**kw) as the raw bytes the approval system sends."""
    return json.dumps(callback_payload(**kw)).encode()


def rejected(
    body: bytes,
    *,
    timestamp: str | None = TS,
    signature: str | None = None,
    secret: str = SECRET,
    now: float = NOW,
) -> SignatureFault:
    """The reason verification refuses this delivery (fails the test if it is accepted)."""
    if signature is None:
        signature = sign(SECRET, timestamp or TS, body)
    with pytest.raises(SignatureRejected) as caught:
        verify_signature(secret, timestamp, body, signature, now=now)
    return caught.value.reason


# --- signatures --------------------------------------------------------------------------------


def test_valid_signature_is_accepted() -> None:
    """A callback signed with our secret over its timestamp and raw body is accepted."""
    body = callback_body()

    verify_signature(SECRET, TS, body, sign(SECRET, TS, body), now=NOW + 12.5)


def test_sign_follows_the_documented_recipe() -> None:
    """sign() is HMAC-SHA256 of "<timestamp>.<raw body>" with the shared secret, hex, prefixed."""
    body = b'{"request_id":"r1"}'
    mac = hmac.new(SECRET.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()

    assert sign(SECRET, TS, body) == sign(SECRET, NOW, body) == "sha256=" + mac


def test_docs_worked_example_matches_sign() -> None:
    """The worked example in docs/approval-protocol.md gives the signature sign() gives."""
    body = (
        b'{"request_id":"req-0001","operation_id":"0b9f6c1e-5d4a-4c8e-9a51-3f2d7e8c9b10",'
        b'"approval_id":"apr-1","decision":"approved","ext":{"mrId":42,"project":"platform/config"}}'
    )

    assert sign("s3cret", "1700000000", body) == (
        "sha256=f3299210d2ddd9b2635c6e69e974cdea0b896c1826cbcb4205a8664a0f9cab96"
    )


def test_uppercase_signature_is_accepted() -> None:
    """Hex digits and the algorithm prefix are compared case-insensitively."""
    body = callback_body()

    verify_signature(SECRET, TS, body, sign(SECRET, TS, body).upper(), now=NOW)


def test_tampered_body_is_rejected() -> None:
    """A body changed after signing (approved turned into rejected) fails as a mismatch."""
    signature = sign(SECRET, TS, callback_body(decision="rejected"))

    assert rejected(callback_body(), signature=signature) is SignatureFault.MISMATCH


def test_wrong_secret_is_rejected() -> None:
    """A callback signed with another secret fails as a mismatch."""
    body = callback_body()

    signature = sign("someone-elses-secret", TS, body)

    assert rejected(body, signature=signature) is SignatureFault.MISMATCH


def test_timestamp_is_part_of_the_signature() -> None:
    """Moving a signed callback to a fresher timestamp breaks its signature."""
    body = callback_body()
    signature = sign(SECRET, str(NOW - 600), body)

    assert rejected(body, timestamp=TS, signature=signature) is SignatureFault.MISMATCH


@pytest.mark.parametrize("offset", [-301, 301, -86_400, 10**9])
def test_stale_timestamp_is_rejected_in_both_directions(offset: int) -> None:
    """A timestamp more than the 300 s window before or after our clock is stale."""
    body = callback_body()
    timestamp = str(NOW + offset)

    assert rejected(body, timestamp=timestamp) is SignatureFault.STALE


@pytest.mark.parametrize("offset", [-300, 300])
def test_timestamp_at_the_window_edge_is_accepted(offset: int) -> None:
    """A timestamp exactly 300 s away (either way) is still inside the window."""
    body = callback_body()
    timestamp = str(NOW + offset)

    verify_signature(SECRET, timestamp, body, sign(SECRET, timestamp, body), now=NOW)


def test_replayed_callback_passes_verification() -> None:
    """A duplicate delivery inside the window verifies again: deduping is the inbox's job.

    The inbox is unique on request_id, and the callback guard ignores decisions for operations
    no longer waiting; verification only proves who sent it and that it is recent.
    """
    body = callback_body()
    signature = sign(SECRET, TS, body)

    verify_signature(SECRET, TS, body, signature, now=NOW)
    verify_signature(SECRET, TS, body, signature, now=NOW + 60)


@pytest.mark.parametrize(
    ("timestamp", "signature"), [(None, "x"), ("", "x"), (TS, None), (TS, ""), (None, None)]
)
def test_missing_headers_are_rejected(timestamp: str | None, signature: str | None) -> None:
    """A callback without the timestamp or the signature header is refused as missing."""
    body = callback_body()

    with pytest.raises(SignatureRejected) as caught:
        verify_signature(SECRET, timestamp, body, signature, now=NOW)

    assert caught.value.reason is SignatureFault.MISSING


@pytest.mark.parametrize(
    "signature",
    [
        "sha1=" + "a" * 64,
        "a" * 71,
        "sha256=" + "a" * 63,
        "sha256=" + "a" * 65,
        "sha256=" + "g" * 64,
        "sha256=" + "a" * 32 + "," + "a" * 31,
        "sha256:" + "a" * 64,
        "sha256=" + "\u0660" * 64,
    ],
)
def test_malformed_signature_header_is_rejected(signature: str) -> None:
    """A signature header that is not "sha256=<64 hex digits>" is refused as malformed."""
    assert rejected(callback_body(), signature=signature) is SignatureFault.MALFORMED


@pytest.mark.parametrize(
    "timestamp", ["abc", "1700000000.5", "-1700000000", "+1700000000", "\u0661\u0667", " 1 7"]
)
def test_malformed_timestamp_is_rejected(timestamp: str) -> None:
    """A timestamp that is not plain ASCII digits is refused as malformed."""
    body = callback_body()

    assert rejected(body, timestamp=timestamp) is SignatureFault.MALFORMED


def test_empty_secret_verifies_nothing() -> None:
    """With no secret configured every callback is refused, even one "signed" with ''."""
    body = callback_body()

    reason = rejected(body, signature=sign("", TS, body), secret="")

    assert reason is SignatureFault.UNCONFIGURED


# --- parsing -----------------------------------------------------------------------------------


def test_parse_approve_first_callback() -> None:
    """A callback without ext.mrId parses as an approve-first decision."""
    callback = parse_callback(callback_body())

    assert callback == ApprovalCallback(
        request_id="req-0001",
        operation_id="0b9f6c1e-5d4a-4c8e-9a51-3f2d7e8c9b10",
        approval_id="apr-1",
        decision=Decision.APPROVED,
        mr_iid=None,
    )
    assert callback.flow is Flow.APPROVE_FIRST


@pytest.mark.parametrize("mr_id", [42, "42"])
def test_parse_mr_first_callback(mr_id: int | str) -> None:
    """A callback with ext.mrId (an int or a numeric string) parses as MR-first with that iid."""
    callback = parse_callback(callback_body(ext={"mrId": mr_id, "project": "platform/config"}))

    assert callback.mr_iid == 42
    assert callback.flow is Flow.MR_FIRST


@pytest.mark.parametrize("body", [callback_body(ext=None), callback_body(ext={})])
def test_parse_callback_with_empty_or_null_ext(body: bytes) -> None:
    """A null or empty ext is an approve-first callback."""
    assert parse_callback(body).flow is Flow.APPROVE_FIRST


def test_parse_callback_without_ext() -> None:
    """A callback that leaves ext out entirely is an approve-first callback."""
    payload = callback_payload()
    del payload["ext"]

    assert parse_callback(json.dumps(payload).encode()).mr_iid is None


@pytest.mark.parametrize("decision", ["approved", "rejected", "withdrawn"])
def test_parse_each_final_decision(decision: str) -> None:
    """Each decision a callback may carry parses to its Decision."""
    assert parse_callback(callback_body(decision=decision)).decision == Decision(decision)


def test_parse_numeric_ids_and_ignores_unknown_fields() -> None:
    """Numeric request and approval ids become strings; fields we do not use are ignored."""
    body = callback_body(request_id=7, approval_id=8, comment="lgtm", ext={"mrId": 3, "x": [1]})

    callback = parse_callback(body)

    assert (callback.request_id, callback.approval_id, callback.mr_iid) == ("7", "8", 3)


@pytest.mark.parametrize(
    ("change", "digest"),
    [
        ({"digest": "ab" * 32}, "ab" * 32),
        ({"digest": "AB" * 32}, "ab" * 32),
        ({"digest": "sha256:" + "0f" * 32}, "0f" * 32),
        ({"project": "platform/config", "files": []}, None),
        ({"digest": None}, None),
        (None, None),
    ],
)
def test_parse_change_digest(change: dict[str, Any] | None, digest: str | None) -> None:
    """ext.change.digest is read (lowercased, "sha256:" prefix dropped) and optional."""
    ext: dict[str, Any] = {"project": "platform/config"}
    if change is not None:
        ext["change"] = change
    assert parse_callback(callback_body(ext=ext)).change_digest == digest


def _without(key: str) -> bytes:
    payload = callback_payload()
    del payload[key]
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "not JSON"),
        (b"approved", "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[]", "not a JSON object"),
        (b'"approved"', "not a JSON object"),
        (b"null", "not a JSON object"),
        (_without("request_id"), "request_id is missing"),
        (_without("operation_id"), "operation_id is missing"),
        (_without("approval_id"), "approval_id is missing"),
        (_without("decision"), "decision is missing"),
        (callback_body(request_id=""), "request_id is empty"),
        (callback_body(operation_id="  "), "operation_id is empty"),
        (callback_body(operation_id=12), "operation_id is not a string"),
        (callback_body(approval_id=True), "approval_id is not a string"),
        (callback_body(approval_id="x" * 256), "longer than 255"),
        (callback_body(request_id="r\n1"), "control"),
        (callback_body(decision="pending"), "not a callback decision"),
        (callback_body(decision="APPROVED"), "unknown decision"),
        (callback_body(decision=1), "decision is not a string"),
        (callback_body(ext=[42]), "ext is not an object"),
        (callback_body(ext={"mrId": True}), "mrId is not an integer"),
        (callback_body(ext={"mrId": 4.2}), "mrId is not an integer"),
        (callback_body(ext={"mrId": "4x"}), "mrId is not an integer"),
        (callback_body(ext={"mrId": " 42"}), "mrId is not an integer"),
        (callback_body(ext={"mrId": 0}), "mrId is out of range"),
        (callback_body(ext={"mrId": -1}), "mrId is out of range"),
        (callback_body(ext={"mrId": 2**31}), "mrId is out of range"),
        (callback_body(ext={"change": "abc"}), "ext.change is not an object"),
        (callback_body(ext={"change": {"digest": 42}}), "digest is not a string"),
        (callback_body(ext={"change": {"digest": "ab" * 31}}), "not a SHA-256 hex digest"),
        (callback_body(ext={"change": {"digest": "zz" * 32}}), "not a SHA-256 hex digest"),
        (callback_body(ext={"change": {"digest": "md5:" + "ab" * 32}}), "not a SHA-256"),
        (b'{"decision": "approved", "decision": "rejected"}', "duplicate key"),
        (b'{"ext": {"mrId": NaN}}', "NaN is not JSON"),
        (b'{"request_id": ' + b"9" * 5000 + b"}", "not JSON"),
        (callback_body(ext={"a": [[[[[[[[1]]]]]]]]}), "nested deeper"),
        (b"[" * 60_000, "nested deeper"),
        (callback_body(ext={"pad": "x" * MAX_CALLBACK_BYTES}), "larger than"),
    ],
)
def test_unusable_callback_is_malformed(body: bytes, reason: str) -> None:
    """An unusable body raises MalformedCallback with a short reason naming the problem."""
    with pytest.raises(MalformedCallback) as caught:
        parse_callback(body)

    assert reason in caught.value.reason
    assert len(caught.value.reason) < 120


def test_nesting_up_to_the_limit_is_accepted() -> None:
    """JSON nested exactly to the depth limit still parses (the limit is not off by one)."""
    deep: Any = 1
    for _ in range(MAX_DEPTH - 2):  # the body object and ext are two levels
        deep = [deep]

    assert parse_callback(callback_body(ext={"deep": deep})).decision is Decision.APPROVED


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    """Brackets and escaped quotes inside strings are text, not nesting."""
    body = callback_body(ext={"note": '\\"[[[[[[[[[[{{{{{{{{{{"'})

    assert parse_callback(body).mr_iid is None


# --- parse_callback never raises anything but MalformedCallback ---------------------------------


def _parse_or_none(body: bytes) -> ApprovalCallback | None:
    """parse_callback's result, None for MalformedCallback; anything else escapes and fails."""
    try:
        return parse_callback(body)
    except MalformedCallback as exc:
        reason = exc.reason
    assert reason, "a MalformedCallback always says why"
    return None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["approved", "rejected", "withdrawn", "pending", "42", ""]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["mrId", "ext", "x", ""]) | st.text(max_size=5), children)
    ),
    max_leaves=10,
)


@given(st.binary(max_size=2048))
def test_parse_arbitrary_bytes_only_raises_malformed(body: bytes) -> None:
    """Arbitrary bytes either parse or raise MalformedCallback, never anything else."""
    _parse_or_none(body)


@given(
    replaced=st.dictionaries(
        st.sampled_from(["request_id", "operation_id", "approval_id", "decision", "ext"]),
        json_values,
    ),
    removed=st.sets(st.sampled_from(["request_id", "operation_id", "approval_id", "decision"])),
    mr_id=json_values,
)
def test_parse_mutated_fields_only_raises_malformed(
    replaced: dict[str, Any], removed: set[str], mr_id: Any
) -> None:
    """A valid callback with fields replaced by any JSON value or removed parses or is malformed."""
    payload = callback_payload(ext={"mrId": mr_id})
    payload.update(replaced)
    for key in removed:
        payload.pop(key, None)

    result = _parse_or_none(json.dumps(payload).encode())

    if result is not None:
        assert result.decision.final
        assert result.mr_iid is None or result.mr_iid >= 1


@given(data=st.data())
def test_parse_mutated_bytes_only_raises_malformed(data: st.DataObject) -> None:
    """A valid callback with bytes flipped, cut or inserted parses or is malformed."""
    body = bytearray(callback_body(ext={"mrId": 42, "project": "platform/config"}))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=0, max_value=len(body)))
        kind = data.draw(st.sampled_from(["replace", "insert", "delete"]))
        chunk = data.draw(st.binary(min_size=1, max_size=4) | st.sampled_from([b"[", b"{", b"\\"]))
        if kind == "insert":
            body[at:at] = chunk
        elif kind == "delete":
            del body[at : at + len(chunk)]
        else:
            body[at : at + len(chunk)] = chunk

    _parse_or_none(bytes(body))


ids = st.text(
    st.characters(max_codepoint=0x2FFF, categories=["L", "N", "P", "S"]), min_size=1, max_size=60
)


@given(
    request_id=ids,
    operation_id=ids,
    approval_id=ids,
    decision=st.sampled_from(["approved", "rejected", "withdrawn"]),
    mr_iid=st.none() | st.integers(min_value=1, max_value=2**31 - 1),
)
def test_parse_round_trips_every_valid_callback(
    request_id: str, operation_id: str, approval_id: str, decision: str, mr_iid: int | None
) -> None:
    """Every well-formed callback parses to exactly the values that were sent."""
    ext = {} if mr_iid is None else {"mrId": mr_iid}
    body = callback_body(
        request_id=request_id,
        operation_id=operation_id,
        approval_id=approval_id,
        decision=decision,
        ext=ext,
    )

    assert parse_callback(body) == ApprovalCallback(
        request_id, operation_id, approval_id, Decision(decision), mr_iid
    )
