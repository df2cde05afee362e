# Sourced by scripts/serve and scripts/test: create .venv and install into it exactly what
# requirements/$1.lock pins (every package with its hashes), then the project itself, editable,
# without letting pip resolve anything more; again only when a lock or pyproject.toml changed
# since the last install. Two editable distributions: the product (gitops-bot: bot, webhooks,
# jobs, gitops_bot) and the simulators beside it (gitops-bot-sim: sim/, for the tests and
# `gitops-bot demo`, never in the product's wheel). scripts/lock regenerates the locks.
VENV=${GITOPS_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
lock="requirements/$1.lock"
stamp="$VENV/.installed-$1"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ sim/pyproject.toml -nt "$stamp" ] \
  || [ "$lock" -nt "$stamp" ]; then
  "$VENV/bin/python" -m pip install --quiet --require-hashes --no-deps -r "$lock"
  "$VENV/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e ".$2" -e ./sim
  "$VENV/bin/python" -m pip check
  touch "$stamp"
fi
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
export PATH="$VENV/bin:$PATH"
