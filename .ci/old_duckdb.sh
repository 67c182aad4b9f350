#!/usr/bin/env bash
# A store written by this footprint (and the DuckDB it installs) opens in older DuckDB clients:
# the oldest the dependency range allows and the newest 1.x (the CLI most package indexes ship).
# The demo records a store; a fresh venv with only that DuckDB opens it read-only and reads every
# documented view.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
lowest="$(sed -n 's/.*"duckdb>=\([0-9.]*\)".*/\1/p' "$root/pyproject.toml")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
PYTHON="${PYTHON:-python3}"

"$root/.venv/bin/footprint" demo --no-explore --db "$work/store.duckdb" >/dev/null
"$PYTHON" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check --quiet)
for spec in "duckdb~=$lowest.0" "duckdb<2"; do
  "${pip[@]}" install --upgrade "$spec"
  "$work/venv/bin/python" - "$work/store.duckdb" <<'EOF'
import sys

import duckdb

con = duckdb.connect(sys.argv[1], read_only=True)
counts = {view: con.execute(f"SELECT count(*) FROM {view}").fetchone()[0]
          for view in ("runs", "stages", "edges", "context", "outputs", "items")}
assert counts["runs"] > 0 and counts["stages"] > 0 and counts["context"] > 0, counts
print(f"duckdb {duckdb.__version__} reads the store: {counts}")
EOF
done
