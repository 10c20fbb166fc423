#!/usr/bin/env bash
# Instructions redis-server spends on one Lua expression, counted by
# callgrind: each line of the file (name|setup|statement) runs as one EVAL
# of 2,000 iterations, less the same loop empty: the per-operation
# figures of docs/benchmarks.md, The floor.
#
#   cd bench && bash floor/micro.sh floor/micro.txt
set -euo pipefail
n=2000 port=$((30000 + RANDOM % 20000)) tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" \
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
vp=$!
for _ in $(seq 1200); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
count() { # script → instructions of one EVAL
	callgrind_control -z "$vp" >/dev/null 2>&1
	redis-cli -p "$port" EVAL "$1" 1 k >/dev/null
	callgrind_control -d "$vp" >/dev/null 2>&1
	awk '/^summary:/{print $2}' "$(ls -t "$tmp"/cg.* | head -1)"
}
echo "| expression | instructions |"
echo "| --- | ---: |"
while IFS='|' read -r name setup body; do
	[[ -z $name || $name == \#* ]] && continue
	e=$(count "$setup; for i = 1, $n do end return 0")
	w=$(count "$setup; for i = 1, $n do $body end return 0")
	echo "| $name | $(((w - e) / n)) |"
done <"$1"
kill "$vp"; wait "$vp" 2>/dev/null || true
