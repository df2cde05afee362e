# Sourced by scripts/serve and scripts/test: create .venv and install the project into it,
# again only when pyproject.toml (or sim/pyproject.toml) changed since the last install.
# Two editable distributions: the product (gitops-bot: bot, webhooks, jobs, gitops_bot) and the
# simulators beside it (gitops-bot-sim: sim/, for the tests and `gitops-bot demo`, never in the
# product's wheel).
VENV=${GITOPS_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.installed-$1"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ sim/pyproject.toml -nt "$stamp" ]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e ".$2" -e ./sim
  touch "$stamp"
fi
export PATH="$PWD/$VENV/bin:$PATH"
