#!/usr/bin/env bash
# Instructions redis-server executes per script call, counted by valgrind's
# callgrind: a yardstick that, unlike server µs, does not move with the load
# of a shared machine (the same script measures the same count to ±0.3 %).
# The whole server process is counted (event loop, request parsing, the
# script, the reply), so a row is what one EVALSHA costs the server.
#
#   cd bench && bash floor/instr.sh [rev]
#
# rev, when given (a commit), adds rows for abs_inc.lua and sup_inc.lua as
# they were at that commit. Needs valgrind, redis-server and
# redis-cli (Debian: valgrind, redis-server, redis-tools) and Go.
#
# Each row runs a fresh server under callgrind, loads the script, sends one
# round of calls over 2,000 keys (unmeasured: it creates the keys), then
# three more rounds, and divides the instructions of those by their calls.
# "join": every call joins its key's newest bucket; "open": every call opens
# one; "steady": 200 keys called every 300 ms for 78 s, the last 40 rounds
# measured, when the window is full and every other call finds its oldest
# bucket dead (floor/seq). All pass the clock as an argument, so none calls
# TIME; "TIME" rows read Redis TIME (an empty ARGV[1], which floor/seq
# sends for EMPTY) over 50 keys and 20 measured rounds,
# which under valgrind's slowdown mixes joins with some opens. "overloaded"
# is the hot key of docs/benchmarks.md's paths at a smaller scale: 20 keys,
# W = 1 s, B = 10 ms, S = 100, H = 150, each called once a millisecond (10
# times its rate) for 3 s, the last second measured: most calls are refused
# between S and H (the factor cached for 100 ms) with a RetryAfter. Its TTL
# is an hour: TTLs run in real time, and under valgrind's slowdown a TTL of
# W + B would expire keys between calls (the steady rows' 60.6 s may too,
# over their 78 s of traffic). "saturated" is the same traffic on
# abs_inc.lua with C = 100: 90 % of the calls are refusals. The "TIME,
# saturated" rows are the hot key of the paths as the production path
# meets it: Redis TIME, 5 keys at 10 per second, each called hundreds of
# times a second under valgrind, so redis_rate and abs_inc.lua refuse
# nearly every call and sup_inc.lua (H = 15) suppresses them.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/seq" ./floor/seq
rr_dir=$(go list -m -f '{{.Dir}}' github.com/go-redis/redis_rate/v10)
awk '/var allowN = redis.NewScript\(`/{f=1;next} /^`\)/{if(f){exit}} f' "$rr_dir/lua.go" >"$tmp/redis_rate.lua"
if [[ -n $rev ]]; then
	git show "$rev:scripts/abs_inc.lua" >"$tmp/abs_inc_rev.lua"
	git show "$rev:scripts/sup_inc.lua" >"$tmp/sup_inc_rev.lua"
fi

count() { # script mode keyfmt args [keys rounds measured step] → instructions per measured call
	local script=$1 mode=$2 keyfmt=$3 args=$4 keys=${5:-2000} rounds=${6:-4} measured=${7:-} step=${8:-300}
	[[ -n $measured ]] || measured=$((rounds - 1))
	local first=$((rounds - measured + 1))
	local port=$((30000 + RANDOM % 20000)) out="$tmp/cg.$RANDOM"
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$tmp/log" 2>&1 &
	local vp=$!
	for _ in $(seq 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
	local sha
	sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$script")")
	"$tmp/seq" -sha "$sha" -mode "$mode" -step "$step" -keys "$keys" -first 1 -last $((first - 1)) -key "$keyfmt" -args "$args" |
		redis-cli -p "$port" --pipe >/dev/null
	callgrind_control -d "$vp" >/dev/null 2>&1
	"$tmp/seq" -sha "$sha" -mode "$mode" -step "$step" -keys "$keys" -first "$first" -last "$rounds" -key "$keyfmt" -args "$args" |
		redis-cli -p "$port" --pipe >"$tmp/pipe"
	callgrind_control -d "$vp" >/dev/null 2>&1
	grep -q 'errors: 0' "$tmp/pipe" || { echo "calls failed: $(cat "$tmp/pipe")" >&2; exit 1; }
	kill "$vp"; wait "$vp" 2>/dev/null || true
	local total
	total=$(awk '/^summary:/{print $2}' "$out.2")
	echo $((total / (measured * keys)))
}

ABS='NOW 60000 600 1000 1 60600'
SUP='NOW 60000 600 1000 1500 1 100 500000 60600'
SUPO='NOW 1000 10 100 150 1 100 500000 3600000' # a TTL of an hour: valgrind's slowdown must not expire the key
ABSS='NOW 1000 10 100 1 3600000'
ABST='EMPTY 1000 10 10 1 3600000'
SUPT='EMPTY 1000 10 10 15 1 100 500000 3600000'
AK='sluice:{user:%d}:abs:h'
SK='sluice:{user:%d}:sup:h'
rows=(
	"return 1 (6 arguments)|floor/return1.lua|join|k:%d|$ABS"
	"redis_rate allowN (GCRA, calls TIME)|$tmp/redis_rate.lua|join|rate:user:%d|1000 1000 60 1"
	"abs_inc.lua, join|../scripts/abs_inc.lua|join|$AK|$ABS"
	"abs_inc.lua, open|../scripts/abs_inc.lua|open|$AK|$ABS"
	"sup_inc.lua, join|../scripts/sup_inc.lua|join|$SK|$SUP"
	"sup_inc.lua, open|../scripts/sup_inc.lua|open|$SK|$SUP"
	"abs_inc.lua, steady|../scripts/abs_inc.lua|steady|$AK|$ABS"
	"sup_inc.lua, steady|../scripts/sup_inc.lua|steady|$SK|$SUP"
	"sup_inc.lua, overloaded|../scripts/sup_inc.lua|overload|$SK|$SUPO"
	"abs_inc.lua, saturated|../scripts/abs_inc.lua|overload|$AK|$ABSS"
)
if [[ -n $rev ]]; then
	rows+=(
		"abs_inc.lua at $rev, join|$tmp/abs_inc_rev.lua|join|$AK|$ABS"
		"abs_inc.lua at $rev, open|$tmp/abs_inc_rev.lua|open|$AK|$ABS"
		"sup_inc.lua at $rev, join|$tmp/sup_inc_rev.lua|join|$SK|$SUP"
		"sup_inc.lua at $rev, open|$tmp/sup_inc_rev.lua|open|$SK|$SUP"
		"abs_inc.lua at $rev, steady|$tmp/abs_inc_rev.lua|steady|$AK|$ABS"
		"sup_inc.lua at $rev, steady|$tmp/sup_inc_rev.lua|steady|$SK|$SUP"
		"sup_inc.lua at $rev, overloaded|$tmp/sup_inc_rev.lua|overload|$SK|$SUPO"
		"abs_inc.lua at $rev, saturated|$tmp/abs_inc_rev.lua|overload|$AK|$ABSS"
	)
fi

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), valgrind $(valgrind --version)"
echo
echo "| script, path | instructions per call |"
echo "| --- | ---: |"
for r in "${rows[@]}"; do
	IFS='|' read -r name file mode keyfmt args <<<"$r"
	if [[ $mode == overload ]]; then
		echo "| $name | $(count "$file" steady "$keyfmt" "$args" 20 3000 1000 1) |"
	elif [[ $mode == steady ]]; then
		echo "| $name | $(count "$file" "$mode" "$keyfmt" "$args" 200 260 40) |"
	else
		echo "| $name | $(count "$file" "$mode" "$keyfmt" "$args") |"
	fi
done
T='EMPTY 60000 600 1000 1 60600' # EMPTY: an empty ARGV[1], the script reads TIME
echo "| redis_rate, TIME, 50 keys | $(count "$tmp/redis_rate.lua" join rate:user:%d '1000 1000 60 1' 50 21) |"
echo "| abs_inc.lua, TIME, 50 keys | $(count ../scripts/abs_inc.lua join "$AK" "$T" 50 21) |"
TS='EMPTY 60000 600 1000 1500 1 100 500000 60600'
echo "| sup_inc.lua, TIME, 50 keys | $(count ../scripts/sup_inc.lua join "$SK" "$TS" 50 21) |"
echo "| redis_rate, TIME, saturated, 5 keys | $(count "$tmp/redis_rate.lua" join rate:user:%d '10 10 1 1' 5 2000 1000) |"
echo "| abs_inc.lua, TIME, saturated, 5 keys | $(count ../scripts/abs_inc.lua join "$AK" "$ABST" 5 2000 1000) |"
echo "| sup_inc.lua, TIME, overloaded, 5 keys | $(count ../scripts/sup_inc.lua join "$SK" "$SUPT" 5 2000 1000) |"
if [[ -n $rev ]]; then
	echo "| abs_inc.lua at $rev, TIME, saturated, 5 keys | $(count "$tmp/abs_inc_rev.lua" join "$AK" "$ABST" 5 2000 1000) |"
	echo "| sup_inc.lua at $rev, TIME, overloaded, 5 keys | $(count "$tmp/sup_inc_rev.lua" join "$SK" "$SUPT" 5 2000 1000) |"
	echo "| abs_inc.lua at $rev, TIME, 50 keys | $(count "$tmp/abs_inc_rev.lua" join "$AK" "$T" 50 21) |"
	echo "| sup_inc.lua at $rev, TIME, 50 keys | $(count "$tmp/sup_inc_rev.lua" join "$SK" "$TS" 50 21) |"
fi
