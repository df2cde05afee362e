# Sourced by scripts/test: the Debian packages the tests need, installed when missing.
#   chromium    the dashboard's browser test (tests/pages/test_browser.py)
#   prometheus  its promtool, which unit-tests deploy/prometheus/alerts.yml (tests/ops)
# A missing tool is not a reason to skip a test: without root (or sudo) this stops here.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== apt-get install ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "the tests need Debian's ${missing[*]}: apt-get install ${missing[*]} as root" >&2
    exit 1
  fi
  # Try the package lists the machine has first; refresh them only when that fails.
  if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; then
    "${as_root[@]}" apt-get update -q
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  fi
fi
