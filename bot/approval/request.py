"""What the bot asks approvers to decide, as the submit call sends it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.core.states import Flow


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What approvers are asked to decide; `ext` carries the MR iid for the MR-first flow and
    the change identity (`ext.change`: project, target branch, digest, files, MR-first head)."""

    operation_id: str
    title: str
    description: str
    applicant: str
    callback_url: str
    mr_iid: int | None = None
    project: str | None = None
    #: ChangeIdentity.ext(): what an approval of this request approves
    change: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.operation_id.strip():
            raise ValueError("an approval request needs an operation_id (its Idempotency-Key)")
        if self.mr_iid is not None:
            if isinstance(self.mr_iid, bool) or self.mr_iid < 1:
                raise ValueError(f"mr_iid must be a positive integer, got {self.mr_iid!r}")
            if not self.project:
                raise ValueError("an MR iid means nothing without its project")

    @property
    def flow(self) -> Flow:
        """MR-first when an MR iid rides along; the callback tells the flows apart the same way."""
        return Flow.MR_FIRST if self.mr_iid is not None else Flow.APPROVE_FIRST

    @property
    def ext(self) -> dict[str, Any]:
        """The approval form's extra fields: `mrId` (MR-first only) and `project` when known."""
        ext: dict[str, Any] = {}
        if self.mr_iid is not None:
            ext["mrId"] = self.mr_iid
        if self.project:
            ext["project"] = self.project
        if self.change is not None:
            ext["change"] = self.change
        return ext

    def to_json(self) -> dict[str, Any]:
        """The submit body, exactly as sent."""
        return {
            "operation_id": self.operation_id,
            "title": self.title,
            "description": self.description,
            "applicant": self.applicant,
            "ext": self.ext,
            "callback_url": self.callback_url,
        }
