# Sourced by scripts/serve and scripts/test: create .venv and install the project into it,
# again only when pyproject.toml changed since the last install.
VENV=${GITOPS_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.installed-$1"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e ".$2"
  touch "$stamp"
fi
export PATH="$PWD/$VENV/bin:$PATH"
