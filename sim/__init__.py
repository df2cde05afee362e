"""Stand-ins for the systems around the bot, for the end-to-end tests and `gitops-bot demo`.

`gitlab`: a stateful GitLab double (REST v4 subset, webhooks, faults) served over real HTTP.
`approval`: an approval system that takes submissions and calls back, signed.
`deploy`: the project's CI (check pipelines pass) and deployment pipeline (calls back).
`relay`: delivers the double's webhooks to the bot, as GitLab's hook sender does.

None of this runs in production; nothing in bot/, webhooks/ or jobs/ imports it. It is a
distribution of its own (sim/pyproject.toml, installed editable beside the product by
scripts/_venv.sh), so the product's wheel never ships it.
"""
