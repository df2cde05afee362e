"""The use cases: what the bot does for each thing that happens to it.

`events/` turns a stored delivery (a GitLab event, an approval decision, a deploy signal) into a
transition; `steps/` runs each workflow step (what to do decided from the operation, then done
against GitLab and the approval system); `commands/` answers MR commands; `operator.py` is retry,
cancel, revert and queue for the API, the CLI and MR commands alike; `outbox.py`, `sweep.py`,
`reconcile.py` and `hooks.py` are the periodic work. Entry points (the Flask blueprints in
`webhooks`, the RQ jobs in `jobs`, the CLI in `gitops_bot`) call these with the services they were
given; nothing here imports them.
"""
