"""The bot's small family of errors (flat, one line each, as in rq/exceptions.py)."""

from __future__ import annotations


class GitopsError(Exception):
    """Base of every error the bot raises on purpose."""


class CannotProceed(GitopsError):
    """A deterministic failure: becomes a failure state and a line in the status comment."""


class TransientError(GitopsError):
    """Worth retrying later (5xx, 429, a connection error)."""


class UnknownOperation(GitopsError):
    """No operation has this id."""


class IllegalTransition(GitopsError):
    """The transition table has no row for this (state, event), or every guard said no."""


class Conflict(GitopsError):
    """Lost a compare-and-set race: someone else moved the operation first; re-read and retry."""


class NotOwner(GitopsError):
    """The operation no longer owns its binding (re-applied): its events are stale."""


class InProgress(GitopsError):
    """A request for this subject and target is in progress (its operation id: .args[0])."""


class LeaseLost(GitopsError):
    """A running step's lease on its operation was taken by another worker: stop, write nothing."""
