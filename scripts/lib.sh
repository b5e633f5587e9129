# Shared set-up for scripts/test, scripts/demo and scripts/fetch-jars (sourced, not run).
# Makes a fresh machine ready: Java 17 + Maven (from Debian if absent), a project virtualenv with
# the package and its extras. Every step is skipped when already done, so warm runs are quick.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LAKEGATE_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

log() { printf '\033[1m[lakegate]\033[0m %s\n' "$*" >&2; }

# wants_help "$@": true when -h or --help is among the arguments.
wants_help() {
  local arg
  for arg in "$@"; do
    case "$arg" in -h|--help) return 0 ;; esac
  done
  return 1
}

# help_and_exit [PYTHON ARGS...]: print the calling script's help at once and exit, installing
# nothing: its Python command's own --help when the virtualenv exists (PYTHON ARGS given), else the
# script's header comment.
help_and_exit() {
  if [ $# -gt 0 ] && [ -x "$PY" ]; then
    cd "$ROOT" && exec "$PY" "$@" --help
  fi
  sed -n '2,/^[^#]/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  [ $# -gt 0 ] && echo "(more options: $(basename "$0") --help, once the virtualenv is set up by any run)"
  exit 0
}

# ensure_debian_tool COMMAND PACKAGE: install PACKAGE from Debian when COMMAND is missing (as root).
ensure_debian_tool() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing $2 from Debian packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  else
    log "error: need $1 (Debian package $2) on PATH"; exit 1
  fi
}

ensure_jvm_tools() {
  local missing=()
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing ${missing[*]} from Debian packages"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      log "error: need ${missing[*]} (Java 17 and Maven) on PATH"; exit 1
    fi
  fi
}

ensure_venv() {
  local extras="${1:-test}"
  local stamp="$VENV/.lakegate-$extras"
  local want
  want="$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  if [ ! -x "$PY" ]; then
    log "creating virtualenv $VENV"
    python3 -m venv "$VENV"
  fi
  log "installing lakegate[$extras] into $VENV (first run downloads pyspark, ~450 MB)"
  "$PY" -m pip install -q --upgrade pip >/dev/null
  "$PY" -m pip install -q -e "$ROOT[$extras]"
  echo "$want" >"$stamp"
}

fetch_jars() {
  ensure_jvm_tools
  "$PY" -m lakegate_stack.artifacts "$@"
}
