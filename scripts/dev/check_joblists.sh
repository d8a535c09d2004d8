#!/usr/bin/env bash
# Compare the DAG's job lists of the default and the paper config with lists saved before a change:
#   bash scripts/dev/check_joblists.sh save      # before: writes /tmp/joblist_before_{config,paper}.txt
#   bash scripts/dev/check_joblists.sh           # after: "identical" per config, or the diff (exit 1)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${JOBLIST_DIR:-/tmp}
status=0
for c in config paper; do
    args=()
    [ "$c" = config ] || args=(--configfile "config/$c.yaml")
    if [ "${1:-}" = save ]; then
        python scripts/dev/joblist.py "${args[@]}" > "$dir/joblist_before_$c.txt" 2>/dev/null
    else
        python scripts/dev/joblist.py "${args[@]}" --compare "$dir/joblist_before_$c.txt" 2>/dev/null || status=1
    fi
done
exit $status
