#!/usr/bin/env bash
# footprint as a user installs it: `pip install .` into a fresh venv, WITHOUT the dev extras, then
# the pytest plugin's own tests and the project's flowchart snapshot tests, run from outside the
# source tree (so the installed package is what they import), on the lowest syrupy the dependency
# range allows and on the newest. A snapshot written under another name (syrupy 5+ ignoring the
# extension's suffix) has no stored snapshot to match, so the run fails. The install must print
# no deprecation warning. pytest-asyncio is installed because the snapshot tests are `async def`,
# as the docs tell users to do.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
lowest_syrupy="$(sed -n 's/.*"syrupy>=\([0-9.]*\)".*/\1/p' "$root/pyproject.toml")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
PYTHON="${PYTHON:-python3}"

"$PYTHON" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade pip
if ! "${pip[@]}" install --quiet "$root" pytest-asyncio 2>"$work/install.err"; then
  cat "$work/install.err" >&2; exit 1
fi
if grep -i "deprecat" "$work/install.err"; then
  echo "fresh install: pip printed deprecation warnings (above)" >&2; exit 1
fi

suite="$work/outside-project"
mkdir -p "$suite/__snapshots__"
cp "$root/tests/agent/test_pytest_plugin.py" "$root/tests/agent/test_demo_snapshots.py" "$suite/"
cp -r "$root/tests/agent/__snapshots__/test_demo_snapshots" "$suite/__snapshots__/"
printf '[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\naddopts = -p no:cacheprovider\n' \
  >"$suite/pytest.ini"

for syrupy in "$lowest_syrupy" newest; do
  if [ "$syrupy" = newest ]; then
    "${pip[@]}" install --quiet --upgrade syrupy
  else
    "${pip[@]}" install --quiet "syrupy==$syrupy"
  fi
  version="$("$work/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("syrupy"))')"
  echo "fresh install: the plugin's tests on syrupy $version"
  (cd "$suite" && "$work/venv/bin/python" -m pytest -q --snapshot-details)
  unexpected="$(find "$suite/__snapshots__" -type f ! -name '*.flow.txt')"
  if [ -n "$unexpected" ]; then
    echo "fresh install: syrupy $version wrote snapshots under another name: $unexpected" >&2; exit 1
  fi
done
