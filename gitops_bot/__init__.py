"""The composition root: the `gitops-bot` command, wiring the web app, workers and scheduler."""
