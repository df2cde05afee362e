"""The policy file's model: every field optional, what it leaves out falls back to the
environment's settings and the flags (bot/config.py, bot/store/flags.py).

The model is the one source of the published schema (docs/policy.schema.json, generated from
it), and it accepts exactly what that schema accepts: each value is held to its JSON type before
pydantic's lax conversions (which would take `'10'` or `true` for an integer) can see it."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from bot.core.commands import Verb
from bot.core.states import Flow

#: Where the policy file lives in a managed repository (on the target branch).
POLICY_PATH = ".gitops/bot.yml"

#: The access level names the file uses, as GitLab numbers them.
ACCESS_LEVELS: dict[str, int] = {
    "guest": 10,
    "reporter": 20,
    "developer": 30,
    "maintainer": 40,
    "owner": 50,
}

_JSON_TYPES: dict[str, tuple[tuple[type, ...], str, str]] = {
    "integer": ((int,), "int_type", "Input should be a valid integer"),
    "string": ((str,), "string_type", "Input should be a valid string"),
    "boolean": ((bool,), "bool_type", "Input should be a valid boolean"),
    "array": ((list, tuple), "list_type", "Input should be a valid array"),
}


def _json(kind: str) -> BeforeValidator:
    """Refuses what the published schema's `type: <kind>` refuses, before pydantic's lax
    conversions see it: `'10'` or `true` is not an integer, `'yes'` not a boolean, bytes (YAML's
    `!!binary`) not a string, a set (`!!set`) not an array. An integral float is an integer,
    as in JSON Schema (`10.0`)."""
    types, code, message = _JSON_TYPES[kind]

    def check(value: Any) -> Any:
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, types) and (kind == "boolean" or not isinstance(value, bool)):
            return value
        raise PydanticCustomError(code, message)

    return BeforeValidator(check)


_INTEGER = _json("integer")
_STRING = _json("string")
_BOOLEAN = _json("boolean")
_ARRAY = _json("array")
_FORBID = ConfigDict(extra="forbid", frozen=True)
# each type check comes last in its Annotated: pydantic applies the constraints before it to the
# inner type (the schema shows them as JSON Schema keywords) and runs the check before them all
PathEntry = Annotated[str, Field(min_length=1, max_length=1024), _STRING]
PositiveInt = Annotated[int, Field(gt=0), _INTEGER]
#: A poll interval: at most a day (the server's own tiers bound it further, bot/policy/tighten.py).
Interval = Annotated[int, Field(gt=0, le=86_400), _INTEGER]
#: How many polls one tier makes.
Polls = Annotated[int, Field(gt=0, le=10_000), _INTEGER]
Tier = Annotated[tuple[Interval, Polls], Field(description="[interval_seconds, polls]"), _ARRAY]
BranchEntry = Annotated[str, Field(min_length=1, max_length=255), _STRING]
Tiers = Annotated[list[Tier], Field(min_length=1, max_length=20), _ARRAY]
AccessName = Annotated[Literal["guest", "reporter", "developer", "maintainer", "owner"], _STRING]


class Paths(BaseModel):
    """Which paths changes may touch in this repository."""

    model_config = _FORBID
    allowed: Annotated[list[PathEntry], _ARRAY] | None = Field(
        default=None,
        description="Path prefixes changes may touch (narrows GITOPS_ALLOWED_PATHS: a path "
        "must be allowed by both; never a protected path).",
    )
    protected: Annotated[list[PathEntry], _ARRAY] = Field(
        default_factory=list,
        description="More protected files and directories (a trailing `/`); changing one "
        "needs Maintainer. `.gitops/bot.yml` is always protected.",
    )


class Validator(BaseModel):
    """Files matching `glob` are validated (syntax; and `schema`, a JSON Schema in the repo)."""

    model_config = _FORBID
    glob: PathEntry
    schema_: PathEntry | None = Field(default=None, alias="schema")


class Workflow(BaseModel):
    """The step order is the operator's (the `workflow.order` flag): a file that sets it is
    refused (bot/policy/tighten.py); the key stays in the schema to say so by name."""

    model_config = _FORBID
    order: Annotated[Flow, _STRING] | None = None


class Commands(BaseModel):
    """The minimum GitLab access level per MR command verb (verbs left out keep theirs)."""

    model_config = _FORBID
    min_access: dict[Annotated[Verb, _STRING], AccessName] = Field(default_factory=dict)


class Approvals(BaseModel):
    """Who approves (GitLab usernames among the configured approver accounts) and how many: never
    fewer than the server requires (GITOPS_APPROVALS_REQUIRED, else every approver account)."""

    model_config = _FORBID
    approvers: (
        Annotated[list[Annotated[str, Field(min_length=1, max_length=255), _STRING]], _ARRAY] | None
    ) = None
    required: Annotated[int, Field(ge=1, le=10), _INTEGER] | None = None


class Poll(BaseModel):
    """Poll schedules, each [[interval_seconds, polls], ...] (the `poll.*_tiers` flags)."""

    model_config = _FORBID
    pipeline_tiers: Tiers | None = None
    rebase_tiers: Tiers | None = None
    pending_tiers: Tiers | None = None
    covered_tiers: Tiers | None = None
    covered_rebase_tiers: Tiers | None = None
    merge_tiers: Tiers | None = None
    train_tiers: Tiers | None = None


class Deploy(BaseModel):
    """How long the deployment of a merged change may take (at most GITOPS_DEPLOY_TIMEOUT)."""

    model_config = _FORBID
    timeout: Annotated[int, Field(gt=0, le=7 * 86400), _INTEGER] | None = None


class MergeQueue(BaseModel):
    """Whether merges go through the bot's merge queue: always (`false` is refused)."""

    model_config = _FORBID
    enabled: Annotated[bool, _BOOLEAN] | None = None


class Policy(BaseModel):
    """A repository's `.gitops/bot.yml`."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="gitops-bot policy file")
    version: Annotated[Literal[1], _INTEGER] = 1
    paths: Paths = Field(default_factory=Paths)
    target_branches: Annotated[list[BranchEntry], Field(min_length=1, max_length=100), _ARRAY] | (
        None
    ) = Field(
        default=None,
        description="Branch names or globs (`release/*`) changes may target: narrows "
        "GITOPS_TARGET_BRANCHES (a branch must be allowed by both, and protected on GitLab).",
    )
    rules: Annotated[list[Validator], _ARRAY] = Field(
        default_factory=list, alias="validators", max_length=100
    )
    workflow: Workflow = Field(default_factory=Workflow)
    commands: Commands = Field(default_factory=Commands)
    approvals: Approvals = Field(default_factory=Approvals)
    poll: Poll = Field(default_factory=Poll)
    deploy: Deploy = Field(default_factory=Deploy)
    merge_queue: MergeQueue = Field(default_factory=MergeQueue)

    @property
    def validators(self) -> list[tuple[str, str | None]]:
        """The validators as (glob, JSON Schema path or None), for the preview's checks."""
        return [(v.glob, v.schema_) for v in self.rules]

    def min_access(self) -> dict[str, int]:
        """The file's command levels as the `commands.min_access` flag spells them."""
        return {verb.value: ACCESS_LEVELS[name] for verb, name in self.commands.min_access.items()}

    def to_json(self) -> dict[str, Any]:
        """What is recorded on an operation (only what the file sets)."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Policy:
        """The recorded policy again (None: the defaults)."""
        return cls.model_validate(data or {})


def policy_schema() -> str:
    """The published JSON Schema of the file (docs/policy.schema.json), as text."""
    schema = Policy.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://gitops-bot.example/policy.schema.json"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
