#!/usr/bin/env bash
# Schemathesis, every check, against a running weft's own /v1/openapi.json, once per caller:
# an Agent session of a worker and the operator's admin token. Exits non-zero on any failure.
#
# Environment: WEFT_URL (http://host:port), WEFT_WORKER_TOKEN, WEFT_ADMIN_TOKEN, WEFT_PYTHON
# (a Python with schemathesis 4; `scripts/test` installs it), and optionally
# WEFT_SCHEMATHESIS_EXAMPLES (cases per operation and phase; default 10) and
# WEFT_SCHEMATHESIS_REPORT (a directory for the JUnit and NDJSON reports), WEFT_SCHEMATHESIS_SEED
# and WEFT_SCHEMATHESIS_CONFIG (a configuration to use instead of schemathesis.toml: the e2e test
# writes one that adds the ids of the Group it populated).
#
# The event stream never ends: schemathesis.toml reads a few events of it and stops.
# `/ui/*` and `/docs` are pages, not API.
# Tokens travel in the environment, not on the command line: schemathesis.toml reads them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${WEFT_URL:?}" "${WEFT_WORKER_TOKEN:?}" "${WEFT_ADMIN_TOKEN:?}"
python="${WEFT_PYTHON:-python3}"
schemathesis="$(dirname "$python")/schemathesis"
examples="${WEFT_SCHEMATHESIS_EXAMPLES:-10}"
report="${WEFT_SCHEMATHESIS_REPORT:-$(mktemp -d)}"
config="${WEFT_SCHEMATHESIS_CONFIG:-$here/schemathesis.toml}"

# Schemathesis keeps a cache in `.schemathesis/` of the working directory: not in the clone.
mkdir -p "$report"
report="$(cd "$report" && pwd)"
cd "$report"

failed=0
for caller in worker admin; do
  if [ "$caller" = worker ]; then token="$WEFT_WORKER_TOKEN"; else token="$WEFT_ADMIN_TOKEN"; fi
  echo "== schemathesis as $caller"
  WEFT_TOKEN="$token" "$schemathesis" --config-file "$config" --no-color run \
    "$WEFT_URL/v1/openapi.json" \
    --checks all \
    --max-examples "$examples" \
    --seed "${WEFT_SCHEMATHESIS_SEED:-16}" \
    --generation-database none \
    --suppress-health-check all \
    --exclude-path-regex '(^/ui/|^/docs)' \
    --report junit,ndjson \
    --report-dir "$report/$caller" \
    || failed=1
done
exit "$failed"
