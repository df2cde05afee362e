"""Merge Trains API routes (GitLab Premium): list the trains, read a car, add an MR."""

from __future__ import annotations

from . import render_mr, trains
from .errors import ApiError
from .model import CAR_ACTIVE, CAR_COMPLETE, Project, TrainCar
from .routing import Ctx, Reply, router

P = "/projects/{project}"
TRAINS = P + "/merge_trains"
CAR = TRAINS + "/merge_requests/{iid:int}"


def _listed(ctx: Ctx, project: Project, branch: str | None) -> Reply:
    """Cars (of one target branch), filtered by `scope` and sorted by `sort` (desc by default),
    one page of them."""
    scope = ctx.text("scope")
    sort = ctx.text("sort") or "desc"
    if scope not in {None, "active", "complete"}:
        raise ApiError(400, None, error="scope does not have a valid value")
    if sort not in {"asc", "desc"}:
        raise ApiError(400, None, error="sort does not have a valid value")
    wanted = {"active": CAR_ACTIVE, "complete": CAR_COMPLETE}.get(scope or "")
    found: list[TrainCar] = [
        car for car in trains.cars(project, branch) if wanted is None or car.status in wanted
    ]
    if sort == "desc":
        found.reverse()
    return ctx.paginate([render_mr.train_car(ctx.state, project, car) for car in found])


@router.route("GET", TRAINS)
def list_cars(ctx: Ctx) -> Reply:
    """Every car of the project (all target branches mixed, as GitLab does)."""
    project = ctx.project()
    trains.check_available(ctx.state, project, ctx.user)
    return _listed(ctx, project, None)


@router.route("GET", CAR)
def get_car(ctx: Ctx) -> Reply:
    """The MR's car (active, or merged); 404 `Merge Train Merge Request` when it has none
    (never added, or dropped)."""
    project = ctx.project()
    trains.check_available(ctx.state, project, ctx.user)
    mr = ctx.mr(project)
    car = project.train_cars.get(mr.iid)
    if car is None:
        raise ApiError(404, trains.CAR_NOT_FOUND)
    return Reply(200, render_mr.train_car(ctx.state, project, car))


@router.route("POST", CAR)
def add_car(ctx: Ctx) -> Reply:
    """Adds the MR to its target branch's train (201) or sets auto-merge so that it joins when
    its checks pass (202); answers the whole train of that branch either way. Which parameter
    asks for the latter depends on the release (versions.Profile.train_auto_merge_params):
    `when_pipeline_succeeds` up to 17.10, `auto_merge` too from 17.11. A parameter the release
    does not declare is dropped as Grape drops it (ee/lib/api/merge_trains.rb
    `params.slice(:sha, :squash, :when_pipeline_succeeds)`): an MR whose checks are pending is
    then refused 400 "No available merge train strategy" instead of queued."""
    project = ctx.project()
    trains.check_available(ctx.state, project, ctx.user)
    mr = ctx.mr(project)
    boarded = trains.add(
        ctx.state,
        project,
        mr,
        ctx.user,
        sha=ctx.text("sha"),
        auto_merge=any(ctx.flag(name) for name in ctx.state.profile.train_auto_merge_params),
        squash=ctx.flag("squash"),
    )
    reply = _listed(ctx, project, mr.target_branch)
    reply.status = 201 if boarded else 202
    return reply


@router.route("GET", TRAINS + "/{target_branch}")
def list_branch_cars(ctx: Ctx) -> Reply:
    """The cars of one target branch."""
    project = ctx.project()
    trains.check_available(ctx.state, project, ctx.user)
    return _listed(ctx, project, ctx.args["target_branch"])
