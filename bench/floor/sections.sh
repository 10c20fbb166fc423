#!/usr/bin/env bash
# Instructions redis-server executes per call of a script, section by
# section, counted by valgrind's callgrind as instr.sh counts whole calls.
# A script read in sections (abs_inc.lua, sup_inc.lua: lines "-- == N.")
# is cut before each section into a copy that returns 0 there; every copy,
# the whole script and a `return 1` are measured on the same state, and the
# difference between two cuts is the cost of the section between them.
#
#   cd bench && bash floor/sections.sh ../scripts/abs_inc.lua 'sluice:{user:%d}:abs:h' 'NOW 1000 10 1000 1 3600000'
#   cd bench && bash floor/sections.sh ../scripts/sup_inc.lua 'sluice:{user:%d}:sup:h' 'NOW 1000 10 1000 1500 1 100 500000 3600000'
#   cd bench && FLOOR=floor/abs_open_cmds.lua bash floor/sections.sh ../scripts/abs_inc.lua ...   # and one more script
#
# The state is BenchmarkPeers' 10k path: 2,000 keys called every 200 ms
# (STEP) with W = 1 s and B = 10 ms, 7 rounds written by the whole script
# (the window full: five closed buckets), then one measured round at the
# next instant, in which every call opens a bucket and drops the one that
# died. The clock is an argument (NOW), so no call reads TIME: a TIME costs
# every script alike (about 6,700 instructions). The TTL argument is an
# hour: under valgrind's slowdown a TTL of W + B would expire keys between
# rounds. Copies run in parallel (the counts do not depend on the load).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1 keyfmt=$2 args=$3
keys=${KEYS_N:-2000} rounds=${ROUNDS:-7} step=${STEP:-200}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/seq" ./floor/seq
# the script as scripts.go sends it: each "-- include <file>" line replaced by the file
awk -v dir="$(dirname "$src")" '/^[ \t]*-- include [a-z_]+\.lua$/ {f = dir "/" $NF; while ((getline l < f) > 0) print l; close(f); next} {print}' "$src" >"$tmp/src.lua"
src=$tmp/src.lua

count() { # script-to-measure out → instructions per measured call
	local meas=$1 out=$2
	local port=$((30000 + RANDOM % 20000))
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$out.log" 2>&1 &
	local vp=$!
	for _ in $(seq 1200); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
	local sha sha2
	sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$src")")
	sha2=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$meas")")
	"$tmp/seq" -sha "$sha" -mode steady -step "$step" -keys "$keys" -first 1 -last "$rounds" -key "$keyfmt" -args "$args" |
		redis-cli -p "$port" --pipe >/dev/null
	callgrind_control -d "$vp" >/dev/null 2>&1
	"$tmp/seq" -sha "$sha2" -mode steady -step "$step" -keys "$keys" -first $((rounds + 1)) -last $((rounds + 1)) -key "$keyfmt" -args "$args" |
		redis-cli -p "$port" --pipe >"$out.pipe"
	callgrind_control -d "$vp" >/dev/null 2>&1
	grep -q 'errors: 0' "$out.pipe" || { echo "calls failed: $(cat "$out.pipe")" >&2; exit 1; }
	kill "$vp"; wait "$vp" 2>/dev/null || true
	echo $(($(awk '/^summary:/{print $2}' "$out.2") / keys))
}

echo 'return 1' >"$tmp/c00.lua"
names=("return 1")
files=("$tmp/c00.lua")
for n in $(grep -o '^-- == [0-9]*\.' "$src" | grep -o '[0-9]*'); do
	awk -v n="$n" '$0 ~ "^-- == " n "\\." {print "do return 0 end"} {print}' "$src" >"$tmp/c$n.lua"
	names+=("before $(grep "^-- == $n\." "$src" | sed 's/^-- == //; s/ =*$//')")
	files+=("$tmp/c$n.lua")
done
names+=("whole script")
files+=("$src")
if [[ -n ${FLOOR:-} ]]; then
	names+=("$(basename "$FLOOR")")
	files+=("$FLOOR")
fi
for i in "${!files[@]}"; do
	count "${files[$i]}" "$tmp/cg$i" >"$tmp/n$i" &
done
wait
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), valgrind $(valgrind --version), $(basename "$src")"
echo
echo "| cut | instructions per call | the section before it |"
echo "| --- | ---: | ---: |"
prev=
for i in "${!files[@]}"; do
	v=$(cat "$tmp/n$i")
	d=
	if [[ -n $prev && ${names[$i]} != "$(basename "${FLOOR:-none}")" ]]; then d=$((v - prev)); fi
	echo "| ${names[$i]} | $v | $d |"
	prev=$v
done
