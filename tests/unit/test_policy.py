"""The policy file `.gitops/bot.yml`: its model, its published schema, and problems named at
file:line:col."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bot.core.commands import Verb
from bot.core.states import Flow
from bot.policy import (
    MAX_POLICY_BYTES,
    MAX_POLICY_DEPTH,
    POLICY_PATH,
    Policy,
    PolicyError,
    parse_policy,
    policy_schema,
)

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "policy.schema.json"

FULL = """\
version: 1
paths:
  allowed: [config/, clusters/]
  protected: [clusters/prod/]
validators:
  - glob: "config/**/*.yaml"
    schema: schemas/config.json
  - glob: "**/*.toml"
workflow:
  order: mr_first
commands:
  min_access: {apply: maintainer, status: reporter}
approvals:
  approvers: [approver-1]
  required: 1
poll:
  pipeline_tiers: [[5, 3], [60, 10]]
deploy:
  timeout: 900
merge_queue:
  enabled: false
"""


def problem(text: str) -> PolicyError:
    """The PolicyError parsing `text` raises."""
    with pytest.raises(PolicyError) as caught:
        parse_policy(text)
    return caught.value


def test_the_committed_schema_is_the_generated_one() -> None:
    """docs/policy.schema.json equals the model's schema (regenerate with
    `gitops-bot policy schema > docs/policy.schema.json`)."""
    assert SCHEMA.read_text(encoding="utf-8") == policy_schema()


def test_a_full_file_parses_into_every_setting() -> None:
    """Every section of a complete file is read as written."""
    policy = parse_policy(FULL)
    assert policy.paths.allowed == ["config/", "clusters/"]
    assert policy.paths.protected == ["clusters/prod/"]
    assert policy.validators == [("config/**/*.yaml", "schemas/config.json"), ("**/*.toml", None)]
    assert policy.workflow.order is Flow.MR_FIRST
    assert policy.min_access() == {"apply": 40, "status": 20}
    assert (policy.approvals.approvers, policy.approvals.required) == (["approver-1"], 1)
    assert policy.poll.pipeline_tiers == [(5, 3), (60, 10)]
    assert (policy.deploy.timeout, policy.merge_queue.enabled) == (900, False)
    assert parse_policy(FULL).to_json() == policy.to_json()
    assert type(policy).from_json(policy.to_json()) == policy


def test_an_empty_file_means_the_defaults() -> None:
    """An empty file (or only a comment) leaves everything to the environment."""
    policy = parse_policy("# nothing here\n")
    assert policy.paths.allowed is None
    assert policy.workflow.order is None
    assert policy.to_json() == {}


def test_yaml_syntax_error_names_line_and_column() -> None:
    """A YAML syntax error is reported at the mark the parser gives."""
    err = problem("version: 1\npaths:\n  allowed: [config/\n")
    assert (err.file, err.line) == (POLICY_PATH, 4)
    assert str(err).startswith(f"{POLICY_PATH}:4:")


def test_a_wrong_value_is_reported_where_it_stands() -> None:
    """A schema violation points at the offending node, not at the file's start."""
    err = problem("version: 1\nworkflow:\n  order: sideways\n")
    assert (err.line, err.column) == (3, 10)
    assert "workflow.order" in err.message


def test_an_unknown_key_is_reported_at_the_key() -> None:
    """extra="forbid": a misspelt key is named at its own position."""
    err = problem("version: 1\npaths:\n  alowed: [config/]\n")
    assert (err.line, err.column) == (3, 3)
    assert "paths.alowed" in err.message


def test_a_nested_list_item_is_located() -> None:
    """A bad tier deep in a list points at that item."""
    err = problem("poll:\n  pipeline_tiers:\n    - [5, 3]\n    - [0, 3]\n")
    assert err.line == 4


def test_unknown_verbs_and_levels_are_refused() -> None:
    """Command levels use the verbs and access names the bot knows."""
    assert "commands.min_access" in problem("commands:\n  min_access: {deploy: owner}\n").message
    assert problem("commands:\n  min_access: {apply: admin}\n").line == 2


def test_anchors_aliases_and_tags_are_refused() -> None:
    """No aliases (no billion laughs), no Python tags: safe-load semantics and less."""
    bomb = "a: &a [x, x]\nb: [*a, *a]\n"
    assert "anchors and aliases" in problem(bomb).message
    assert problem("version: !!python/object:os.system 1\n").line == 1


def test_size_and_shape_limits() -> None:
    """A file over 64 KiB, or one that is not a mapping, is refused at 1:1."""
    assert "larger than" in problem("#" * (64 * 1024 + 1)).message
    err = problem("- just\n- a list\n")
    assert (err.line, err.column, err.message) == (1, 1, "expected a mapping")


def test_the_readmes_example_is_a_valid_policy() -> None:
    """The complete example in the README's "The policy file" section parses, every section
    set but the step order, which is the operator's."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The policy file", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    policy = parse_policy(example)
    assert set(policy.to_json()) == {
        "paths",
        "target_branches",
        "validators",
        "commands",
        "approvals",
        "poll",
        "deploy",
        "merge_queue",
    }


@pytest.mark.parametrize(
    "text",
    [
        "paths: " + "[" * 600 + "]" * 600 + "\n",  # flow style: 600 deep in 1 KB
        "".join("  " * n + "a:\n" for n in range(250)) + "  " * 250 + "b: 1\n",  # block style
    ],
)
def test_a_deeply_nested_file_is_a_problem_at_the_node_too_deep(text: str) -> None:
    """Nesting under the size limit but past MAX_POLICY_DEPTH is refused while composing, at the
    first mapping or sequence too deep, like any other broken file (not a RecursionError)."""
    assert len(text.encode()) <= MAX_POLICY_BYTES
    err = problem(text)
    assert err.message == f"nested deeper than {MAX_POLICY_DEPTH} levels"
    if text.startswith("paths"):
        assert (err.line, err.column) == (1, 7 + MAX_POLICY_DEPTH)  # the mapping is level 1
    else:
        assert (err.line, err.column) == (MAX_POLICY_DEPTH + 1, 2 * MAX_POLICY_DEPTH + 1)


def test_nesting_up_to_the_limit_is_judged_by_the_schema() -> None:
    """Exactly MAX_POLICY_DEPTH levels compose: the file is then refused for what it says."""
    text = "paths: " + "[" * (MAX_POLICY_DEPTH - 1) + "]" * (MAX_POLICY_DEPTH - 1) + "\n"
    assert "nested" not in problem(text).message


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("deploy:\n  timeout: '10'\n", (2, 12), "deploy.timeout: Input should be a valid integer"),
        ("deploy:\n  timeout: true\n", (2, 12), "deploy.timeout: Input should be a valid integer"),
        ("poll:\n  pipeline_tiers: [[true, 3]]\n", (2, 21), "poll.pipeline_tiers.0.0: "),
        ("poll:\n  merge_tiers: [[5, '3']]\n", (2, 21), "poll.merge_tiers.0.1: "),
        ("merge_queue: {enabled: 'yes'}\n", (1, 24), "merge_queue.enabled: Input should be a "),
        ("merge_queue: {enabled: 1}\n", (1, 24), "merge_queue.enabled: "),
        ("version: true\n", (1, 10), "version: Input should be a valid integer"),
        ("approvals: {required: '2'}\n", (1, 23), "approvals.required: "),
        ("paths: {allowed: !!set {config/: null}}\n", (1, 18), "paths.allowed: Input should be"),
        ("paths: {allowed: [1]}\n", (1, 19), "paths.allowed.0: Input should be a valid string"),
        ("workflow: {order: !!binary bXJfZmlyc3Q=}\n", (1, 19), "workflow.order: "),
    ],
)
def test_values_the_schema_refuses_are_refused(
    text: str, where: tuple[int, int], message: str
) -> None:
    """No lax conversion: a string or a boolean is not an integer, 1 or 'yes' not a boolean,
    a set not an array, bytes not a string; each is named where it stands."""
    err = problem(text)
    assert (err.line, err.column) == where
    assert err.message.startswith(message)


def test_an_integral_float_is_an_integer_as_in_json_schema() -> None:
    """`timeout: 1800.0` is the integer 1800 for the schema, and so for the bot."""
    assert parse_policy("deploy:\n  timeout: 1800.0\n").deploy.timeout == 1800


_SCHEMA = jsonschema.Draft202012Validator(json.loads(policy_schema()))
_OTHER = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**6),
    st.sampled_from([0.0, 1.0, 10.0, 1.5, 1e300]),
    st.sampled_from(["", "1", "10", "yes", "mr_first", "owner", "apply", "config/"]),
    st.binary(max_size=2),
    st.frozensets(st.integers(1, 3), max_size=2),
    st.lists(st.integers(1, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "glob"]), st.integers(1, 3), max_size=1),
)
_INT = st.one_of(st.integers(-1, 700_000), _OTHER)
_STR = st.one_of(st.sampled_from(["a", "config/", "approver-1", "x" * 1025]), _OTHER)
_TIERS = st.one_of(st.lists(st.lists(_INT, min_size=1, max_size=3), max_size=3), _OTHER)
_SECTIONS: dict[str, Any] = {
    "version": st.one_of(st.just(1), _OTHER),
    "paths": st.fixed_dictionaries(
        {}, optional={"allowed": st.lists(_STR, max_size=2), "protected": st.lists(_STR)}
    ),
    "validators": st.lists(
        st.fixed_dictionaries({"glob": _STR}, optional={"schema": _STR, "other": _STR}),
        max_size=2,
    ),
    "workflow": st.fixed_dictionaries(
        {}, optional={"order": st.one_of(st.sampled_from([f.value for f in Flow]), _STR)}
    ),
    "commands": st.fixed_dictionaries(
        {},
        optional={
            "min_access": st.dictionaries(
                st.one_of(
                    st.sampled_from([*(v.value for v in Verb), "deploy", ""]),
                    st.integers(0, 1),
                    st.none(),
                    st.binary(max_size=1),
                ),
                st.one_of(st.sampled_from(["guest", "maintainer", "admin"]), _STR),
                max_size=2,
            )
        },
    ),
    "approvals": st.fixed_dictionaries(
        {}, optional={"approvers": st.lists(_STR, max_size=2), "required": _INT}
    ),
    "poll": st.fixed_dictionaries({}, optional={"pipeline_tiers": _TIERS, "merge_tiers": _TIERS}),
    "deploy": st.fixed_dictionaries({}, optional={"timeout": _INT}),
    "merge_queue": st.fixed_dictionaries(
        {}, optional={"enabled": st.one_of(st.booleans(), _OTHER)}
    ),
    "extra": _OTHER,
}


@settings(max_examples=250, deadline=None)
@given(st.fixed_dictionaries({}, optional={k: st.one_of(v, _OTHER) for k, v in _SECTIONS.items()}))
def test_the_model_accepts_exactly_what_the_published_schema_accepts(doc: dict[str, Any]) -> None:
    """Generated documents (what YAML's safe loader can produce, right and wrong in every field):
    the model and docs/policy.schema.json agree on each, so an editor checking the schema and
    the bot never disagree."""
    try:
        Policy.model_validate(doc)
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == _SCHEMA.is_valid(doc), doc
