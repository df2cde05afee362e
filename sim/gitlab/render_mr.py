"""GitLab-shaped JSON for merge requests and what hangs off them (approvals, notes, awards)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import flow, repo
from .model import Access, Award, MergeRequest, Note, Project, TrainCar, User
from .render import JSON, pipeline, ts, user

if TYPE_CHECKING:
    from .state import State


def merge_request(
    state: State, p: Project, mr: MergeRequest, *, detail: bool = True, viewer: User | None = None
) -> JSON:
    """A merge request: the list shape, or the single-MR shape with `detail`. Like GitLab's
    entity, the single-MR shape asks for a recheck of an unchecked MR before answering (it
    shows `checking`); the list does not (GitLab 13.0+, without `with_merge_status_recheck`)."""
    if detail:
        flow.read_for_recheck(mr)
    status = state.detailed_status(p, mr)
    users = state.users
    merged_by = user(state, users[mr.merged_by_id]) if mr.merged_by_id else None
    out: JSON = {
        "id": mr.id,
        "iid": mr.iid,
        "project_id": p.id,
        "title": mr.title,
        "description": mr.description,
        "state": mr.state,
        "created_at": ts(mr.created_at),
        "updated_at": ts(mr.updated_at),
        "merged_by": merged_by,
        "merge_user": merged_by,
        "merged_at": ts(mr.merged_at),
        "closed_by": user(state, users[mr.closed_by_id]) if mr.closed_by_id else None,
        "closed_at": ts(mr.closed_at),
        "target_branch": mr.target_branch,
        "source_branch": mr.source_branch,
        "user_notes_count": sum(1 for n in mr.notes.values() if not n.system),
        "upvotes": 0,
        "downvotes": 0,
        "author": user(state, users[mr.author_id]),
        "assignees": [],
        "assignee": None,
        "reviewers": [],
        "source_project_id": mr.source_project_id,
        "target_project_id": p.id,
        "labels": list(mr.labels),
        "draft": mr.draft,
        "work_in_progress": mr.draft,
        "milestone": None,
        "merge_when_pipeline_succeeds": mr.auto_merge,
        "merge_status": state.merge_status(p, mr),
        "detailed_merge_status": status,
        "sha": mr.sha,
        "merge_after": ts(mr.merge_after),
        "merge_commit_sha": mr.merge_commit_sha,
        "squash_commit_sha": mr.squash_commit_sha,
        "discussion_locked": None,
        "should_remove_source_branch": None,
        "force_remove_source_branch": mr.remove_source_branch,
        "reference": f"!{mr.iid}",
        "references": {
            "short": f"!{mr.iid}",
            "relative": f"!{mr.iid}",
            "full": f"{p.path}!{mr.iid}",
        },
        "web_url": state.mr_url(p, mr),
        "squash": mr.squash,
        "squash_on_merge": flow.squash_on_merge(p, mr),
        "has_conflicts": state.has_conflicts(p, mr),
        "blocking_discussions_resolved": True,
        "approvals_before_merge": None,
    }
    if detail:
        out.update(_mr_detail(state, p, mr, viewer))
    return out


def _mr_detail(state: State, p: Project, mr: MergeRequest, viewer: User | None) -> JSON:
    """Fields only GET /merge_requests/:iid answers with."""
    target = p.branches.get(mr.target_branch)
    base = repo.merge_base(state.commits, mr.sha, target) if target else None
    base_tree = state.commits[base].tree if base else {}
    changes = repo.diff(base_tree, state.commits[mr.sha].tree)
    head = flow.shown_head_pipeline(state, p, mr)
    can_merge = viewer is not None and state.access(p, viewer.id) >= Access.DEVELOPER
    return {
        "subscribed": False,
        "changes_count": str(len(changes)),
        "latest_build_started_at": ts(head.started_at) if head else None,
        "latest_build_finished_at": ts(head.finished_at) if head else None,
        "first_deployed_to_production_at": None,
        "pipeline": pipeline(state, p, head) if head else None,
        "head_pipeline": pipeline(state, p, head, detail=True) if head else None,
        "diff_refs": {"base_sha": base, "head_sha": mr.sha, "start_sha": target},
        "merge_error": mr.merge_error,
        "first_contribution": False,
        "user": {"can_merge": can_merge},
    }


def approvals(state: State, p: Project, mr: MergeRequest, viewer: User | None) -> JSON:
    """GET /merge_requests/:iid/approvals."""
    left = max(p.required_approvals - len(mr.approvals), 0)
    viewer_id = viewer.id if viewer else None
    return {
        "id": mr.id,
        "iid": mr.iid,
        "project_id": p.id,
        "title": mr.title,
        "description": mr.description,
        "state": mr.state,
        "created_at": ts(mr.created_at),
        "updated_at": ts(mr.updated_at),
        "merge_status": state.merge_status(p, mr),
        "approved": left == 0,
        "approvals_required": p.required_approvals,
        "approvals_left": left,
        "require_password_to_approve": False,
        "approved_by": [{"user": user(state, state.users[uid])} for uid in mr.approvals],
        "suggested_approvers": [],
        "approvers": [],
        "approver_groups": [],
        "user_has_approved": viewer_id in mr.approvals,
        "user_can_approve": viewer_id is not None
        and viewer_id not in mr.approvals
        and viewer_id not in p.denied_approvers
        and state.access(p, viewer_id) >= Access.DEVELOPER,
        "approval_rules_left": [],
        "has_approval_rules": p.required_approvals > 0,
        "merge_request_approvers_available": True,
        "multiple_approval_rules_available": True,
        "invalid_approvers_rules": [],
    }


def note(state: State, p: Project, mr: MergeRequest, n: Note) -> JSON:
    """A merge request note."""
    return {
        "id": n.id,
        "type": None,
        "body": n.body,
        "attachment": None,
        "author": user(state, state.users[n.author_id]),
        "created_at": ts(n.created_at),
        "updated_at": ts(n.updated_at),
        "system": n.system,
        "noteable_id": mr.id,
        "noteable_type": "MergeRequest",
        "noteable_iid": mr.iid,
        "project_id": p.id,
        "commands_changes": {},
        "resolvable": False,
        "confidential": False,
        "internal": False,
        "imported": False,
        "imported_from": "none",
    }


def award(state: State, a: Award) -> JSON:
    """An award emoji on a note."""
    return {
        "id": a.id,
        "name": a.name,
        "user": user(state, state.users[a.user_id]),
        "created_at": ts(a.created_at),
        "updated_at": ts(a.created_at),
        "awardable_id": a.note_id,
        "awardable_type": "Note",
    }


def train_car(state: State, p: Project, car: TrainCar) -> JSON:
    """A merge train car (`EE::API::Entities::MergeTrains::Car`)."""
    mr = p.mrs[car.mr_iid]
    pl = p.pipelines.get(car.pipeline_id) if car.pipeline_id else None
    duration = int((car.merged_at - car.created_at).total_seconds()) if car.merged_at else None
    return {
        "id": car.id,
        "merge_request": {
            "id": mr.id,
            "iid": mr.iid,
            "project_id": p.id,
            "title": mr.title,
            "description": mr.description,
            "state": mr.state,
            "created_at": ts(mr.created_at),
            "updated_at": ts(mr.updated_at),
            "web_url": state.mr_url(p, mr),
        },
        "user": user(state, state.users[car.user_id]),
        "pipeline": pipeline(state, p, pl) if pl else None,
        "created_at": ts(car.created_at),
        "updated_at": ts(car.updated_at),
        "target_branch": car.target_branch,
        "status": car.status,
        "merged_at": ts(car.merged_at),
        "duration": duration,
    }
