# Sourced by ./tidemq and ./run-tests: create .venv and install the project on first
# use (and again whenever pyproject.toml or the compiled part changes). Needs only python3 >= 3.11.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"

install_stamp() {   # what the install depends on: reinstalled when the dependencies or the compiled
                    # part (setup.py, src/tidemq/accel_c/) change
  cat "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT"/src/tidemq/accel_c/* | sha256sum | cut -d' ' -f1
}

ensure_venv() {   # $1: extras, e.g. "test" or ""
  local extras="$1" stamp want
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
      || { echo "tidemq needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2; exit 1; }
    echo "tidemq: creating $VENV (first run)" >&2
    "$PY" -m venv "$VENV"
  fi
  stamp="$VENV/.installed-${extras:-base}"
  want="$(install_stamp)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "tidemq: installing dependencies${extras:+ ($extras)}" >&2
    local spec="$ROOT"
    [ -n "$extras" ] && spec="$ROOT[$extras]"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec" >&2
    echo "$want" > "$stamp"
  fi
  compile_pyspark_zip
}

compile_pyspark_zip() {   # compiled code in pyspark's pyspark.zip, which Spark puts first on the path of
                          # every Python process it starts (scripts/compile_pyspark_zip.py says why);
                          # again whenever the zip changed (a reinstall)
  local zip stamp="$VENV/.pyspark-zip-compiled"
  for zip in "$VENV"/lib/python3*/site-packages/pyspark/python/lib/pyspark.zip; do
    [ -f "$zip" ] || continue
    if [ "$(cat "$stamp" 2>/dev/null)" != "$(stat -c '%s %Y' "$zip")" ]; then
      echo "tidemq: compiling $zip" >&2
      "$VENV/bin/python" "$ROOT/scripts/compile_pyspark_zip.py" "$zip"
      stat -c '%s %Y' "$zip" > "$stamp"
    fi
  done
}
