#!/usr/bin/env bash
# Instructions redis-server executes per script call, counted by valgrind's
# callgrind: a yardstick that, unlike server µs, does not move with the load
# of a shared machine (the same script measures the same count to ±0.3 %).
# The whole server process is counted (event loop, request parsing, the
# script, the reply), so a row is what one EVALSHA costs the server.
#
#   cd bench && bash floor/instr.sh [rev]
#   cd bench && INSTR_ONLY='set of 3|single' bash floor/instr.sh   # some rows
#
# rev, when given (a commit), adds rows for abs_inc.lua, sup_inc.lua,
# abs_set.lua and sup_set.lua as they were at that commit. A script is
# loaded as scripts.go sends it: each line "-- include <file>" replaced by
# that file's text. Needs valgrind, redis-server and
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
# The "floor: sup_*" rows run sup_inc.lua's traffic through scripts that
# make only its commands (sup_cmds.lua: TIME or PEXPIRE as the clock
# argument says, HMGET m k, HSET m) or those plus the numbers it parses
# and formats on the path (sup_join_parse.lua: an admitted join;
# sup_refuse_parse.lua: an overloaded key's usual refusal), with no
# decision: what those paths cost before the script's own logic.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/seq" ./floor/seq
rr_dir=$(go list -m -f '{{.Dir}}' github.com/go-redis/redis_rate/v10)
awk '/var allowN = redis.NewScript\(`/{f=1;next} /^`\)/{if(f){exit}} f' "$rr_dir/lua.go" >"$tmp/redis_rate.lua"
if [[ -n $rev ]]; then
	mkdir "$tmp/rev"
	git -C .. archive "$rev" scripts | tar -x -C "$tmp/rev"
	for f in abs_inc sup_inc abs_set sup_set; do ln -s "rev/scripts/$f.lua" "$tmp/${f}_rev.lua"; done
fi

lua() { # file → the script's text as scripts.go sends it, each "-- include <file>" line replaced by the file
	awk -v dir="$(dirname "$(readlink -f "$1")")" '/^[ \t]*-- include [a-z_]+\.lua$/ {f = dir "/" $NF; while ((getline l < f) > 0) print l; close(f); next} {print}' "$1"
}

count() { # script mode keyfmt args [keys rounds measured step] → instructions per measured call
	local script=$1 mode=$2 keyfmt=$3 args=$4 keys=${5:-2000} rounds=${6:-4} measured=${7:-} step=${8:-300}
	[[ -n $measured ]] || measured=$((rounds - 1))
	local first=$((rounds - measured + 1))
	local port=$((30000 + RANDOM % 20000)) out="$tmp/cg.$RANDOM"
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$tmp/log" 2>&1 &
	local vp=$!
	for _ in $(seq 1200); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
	local sha
	sha=$(redis-cli -p "$port" SCRIPT LOAD "$(lua "$script")")
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
# SUPH: the suppressed hybrid's lease request of one unit (ARGV[10] to
# ARGV[14]: a lease of n alone, nothing released or pushed, no D), as a
# key below S makes it
SUPH='NOW 60000 600 1000 1500 1 100 500000 60600 1 0 0 0 0'
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
	"sup_inc.lua, hybrid lease below S, steady|../scripts/sup_inc.lua|steady|$SK|$SUPH"
	"floor: sup_cmds.lua, join|floor/sup_cmds.lua|join|$SK|$SUP"
	"floor: sup_join_parse.lua, join|floor/sup_join_parse.lua|join|$SK|$SUP"
	"floor: sup_cmds.lua, overloaded|floor/sup_cmds.lua|overload|$SK|$SUPO"
	"floor: sup_refuse_parse.lua, overloaded|floor/sup_refuse_parse.lua|overload|$SK|$SUPO"
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
		"sup_inc.lua at $rev, hybrid lease below S, steady|$tmp/sup_inc_rev.lua|steady|$SK|$SUPH"
		"abs_inc.lua at $rev, saturated|$tmp/abs_inc_rev.lua|overload|$AK|$ABSS"
	)
fi

# BenchmarkPeers' 10k path: 1,000 per second per key, W = 1 s, B = 10 ms, keys
# called every 200 ms ("10k path": 1,000 keys, 16 rounds, the last 10
# measured), so every call opens a bucket and drops the one that died;
# redis_rate at the same rate with a burst of 1,000 (it reads TIME: add
# about 6,700 instructions to the sluice rows, which take the clock as an
# argument, to compare). floor/sections.sh splits these rows by section
# and, with FLOOR=floor/abs_open_cmds.lua, measures the path's commands
# alone on the state the script leaves (not here: that script's own writes
# keep one closed bucket where the path holds five).
# The rows of floor/abs_string.lua, a prototype: abs_inc.lua's decision on
# one string of packed doubles (GET, PSETEX), the floor of its commands
# (floor/syn_string.lua) and those of the same value in a hash's field
# (floor/syn_hash_m.lua), and, with "a call every 10 ms", 100 keys each
# called once a bucket for 1.2 s, the last 10 rounds measured, so each
# holds W/B + 1 = 101 buckets, the most a key of this rate holds: the
# prototype copies them all on every write. Its "reads TIME" row cannot
# send an empty ARGV[1]: under valgrind's slowdown a round of 1,000 calls
# takes seconds of Redis TIME, not the path's 200 ms, so that copy reads
# TIME, turns it into ms and then parses the clock argument (an upper
# bound: one parse, about 740, more than the TIME path makes).
# "A call every ms": 20 keys of capacity 2,000 each called once a ms for
# 1.1 s, the last 100 rounds measured: a busy key, whose calls mostly join
# its newest bucket, with its window full.
AKS='sluice:{user:%d}:abs:s'
A2='NOW 1000 10 2000 1 3600000'
sed 's/^  now = ARGV\[1\] + 0$/  local t = redis.call('"'"'TIME'"'"')\n  local usec = t[2] + 0\n  now = t[1] * 1000 + (usec - usec % 1000) \/ 1000\n  now = ARGV[1] + 0/' floor/abs_string.lua >"$tmp/abs_string_time.lua"
A1='NOW 1000 10 1000 1 3600000'
S1='NOW 1000 10 1000 1500 1 100 500000 3600000'
rows+=(
	"redis_rate allowN, 10k path (reads TIME)|$tmp/redis_rate.lua|join|rate:user:%d|1000 1000 1 1"
	"abs_inc.lua, 10k path|../scripts/abs_inc.lua|path1s|$AK|$A1"
	"sup_inc.lua, 10k path|../scripts/sup_inc.lua|path1s|$SK|$S1"
	"floor: time1.lua, TIME alone|floor/time1.lua|join|$AK|$A1"
	"abs_string.lua prototype, 10k path|floor/abs_string.lua|path1s|$AKS|$A1"
	"abs_string.lua prototype, reads TIME, 10k path|$tmp/abs_string_time.lua|path1s|$AKS|$A1"
	"floor: syn_string.lua (TIME, GET, PSETEX), 10k path|floor/syn_string.lua|path1s|$AKS|$A1"
	"floor: syn_hash_m.lua (TIME, HMGET m v, HSET m, PEXPIRE), 10k path|floor/syn_hash_m.lua|path1s|$AK|$A1"
	"abs_inc.lua, 10k path, a call every 10 ms (101 buckets)|../scripts/abs_inc.lua|full|$AK|$A1"
	"abs_string.lua prototype, 10k path, a call every 10 ms (101 buckets)|floor/abs_string.lua|full|$AKS|$A1"
	"abs_inc.lua, a call every ms (101 buckets, 9 calls in 10 join)|../scripts/abs_inc.lua|everyms|$AK|$A2"
	"abs_string.lua prototype, a call every ms (101 buckets, 9 calls in 10 join)|floor/abs_string.lua|everyms|$AKS|$A2"
)
if [[ -n $rev ]]; then
	rows+=(
		"abs_inc.lua at $rev, 10k path|$tmp/abs_inc_rev.lua|path1s|$AK|$A1"
		"sup_inc.lua at $rev, 10k path|$tmp/sup_inc_rev.lua|path1s|$SK|$S1"
	)
fi

T='EMPTY 60000 600 1000 1 60600' # EMPTY: an empty ARGV[1], the script reads TIME
TS='EMPTY 60000 600 1000 1500 1 100 500000 60600'
rows+=(
	"redis_rate, TIME, 50 keys|$tmp/redis_rate.lua|time|rate:user:%d|1000 1000 60 1"
	"abs_inc.lua, TIME, 50 keys|../scripts/abs_inc.lua|time|$AK|$T"
	"sup_inc.lua, TIME, 50 keys|../scripts/sup_inc.lua|time|$SK|$TS"
	"redis_rate, TIME, saturated, 5 keys|$tmp/redis_rate.lua|timesat|rate:user:%d|10 10 1 1"
	"abs_inc.lua, TIME, saturated, 5 keys|../scripts/abs_inc.lua|timesat|$AK|$ABST"
	"sup_inc.lua, TIME, overloaded, 5 keys|../scripts/sup_inc.lua|timesat|$SK|$SUPT"
	"floor: sup_cmds.lua, TIME, 50 keys|floor/sup_cmds.lua|time|$SK|$TS"
	"floor: sup_join_parse.lua, TIME, 50 keys|floor/sup_join_parse.lua|time|$SK|$TS"
)
if [[ -n $rev ]]; then
	rows+=(
		"abs_inc.lua at $rev, TIME, 50 keys|$tmp/abs_inc_rev.lua|time|$AK|$T"
		"sup_inc.lua at $rev, TIME, 50 keys|$tmp/sup_inc_rev.lua|time|$SK|$TS"
		"abs_inc.lua at $rev, TIME, saturated, 5 keys|$tmp/abs_inc_rev.lua|timesat|$AK|$ABST"
		"sup_inc.lua at $rev, TIME, overloaded, 5 keys|$tmp/sup_inc_rev.lua|timesat|$SK|$SUPT"
	)
fi

# Sets of three limits against the single Inc of their middle limit
# (docs/benchmarks.md, Sets of limits). The set {second: W = 1 s,
# B = 10 ms; minute: 1 min, 600 ms; hour: 1 h, 36 s}, one hash per limit,
# beside a single Inc of the minute's W and B. abs: capacities 100, 1,000,
# 10,000 ("refused": the second's capacity is 1, so every call after a
# key's first is refused by it; the single's capacity is 1). sup: "join" at
# capacities far above the traffic (every call admitted, factor 0);
# "overloaded" as the single's overloaded row, every limit at 100 per
# second (S = 100, 6,000, 360,000; H = 1.5 S), the second limit between S
# and H and refusing by the draw, the others below S. The "join" and
# "refused" rows pass the clock (every write sets its PEXPIRE, as under a
# caller's clock); the TIME rows read Redis TIME as production does, where
# a join keeps the TTL its bucket's open set. Every TTL argument of the
# set rows (and the single's refused row) is an hour: under valgrind's
# slowdown a TTL of W + B (1,010 ms for the second) expires hashes between
# calls, and a refused key would be admitted afresh.
AS='sluice:{user:%d}:abs:h:second sluice:{user:%d}:abs:h:minute sluice:{user:%d}:abs:h:hour'
# "TIME, joins": the set {minute: 1 min, 600 ms; hour: 1 h, 36 s; day:
# 1 day, 864 s} on Redis TIME with production TTLs (W + B), every call
# joining each limit's newest bucket, as the single's TIME row joins its
# minute's: the path where a join keeps the TTL its bucket's open set
# (absolute capacities 1,000, 10,000, 100,000; suppressed S far above the
# traffic).
AJ='sluice:{user:%d}:abs:h:minute sluice:{user:%d}:abs:h:hour sluice:{user:%d}:abs:h:day'
ASETJ='60000 600 1000 60600 3600000 36000 10000 3636000 86400000 864000 100000 87264000'
# set_meta.lua's keys: one meta hash for the set, then the limits' hashes
AM='sluice:{user:%d}:abs:m sluice:{user:%d}:abs:h:minute sluice:{user:%d}:abs:h:hour sluice:{user:%d}:abs:h:day'
SS='sluice:{user:%d}:sup:h:second sluice:{user:%d}:sup:h:minute sluice:{user:%d}:sup:h:hour'
ASET='1000 10 100 3600000 60000 600 1000 3600000 3600000 36000 10000 3600000'
ASETR='1000 10 1 3600000 60000 600 1000 3600000 3600000 36000 10000 3600000'
SJ='sluice:{user:%d}:sup:h:minute sluice:{user:%d}:sup:h:hour sluice:{user:%d}:sup:h:day'
SSETJ='100 500000 60000 600 100000 150000 1 60600 3600000 36000 100000 150000 1 3636000 86400000 864000 100000 150000 1 87264000'
SSET='100 500000 1000 10 100000 150000 1 3600000 60000 600 100000 150000 1 3600000 3600000 36000 100000 150000 1 3600000'
SSETO='100 500000 1000 10 100 150 1 3600000 60000 600 6000 9000 1 3600000 3600000 36000 360000 540000 1 3600000'
rows+=(
	"abs_inc.lua, single, join|../scripts/abs_inc.lua|join|$AK|$ABS"
	"abs_set.lua, set of 3, join|../scripts/abs_set.lua|join|$AS|NOW 1 $ASET"
	"abs_inc.lua, single, refused|../scripts/abs_inc.lua|join|$AK|NOW 60000 600 1 1 3600000"
	"abs_set.lua, set of 3, refused|../scripts/abs_set.lua|join|$AS|NOW 1 $ASETR"
	"abs_inc.lua, single, TIME, 50 keys|../scripts/abs_inc.lua|time|$AK|$T"
	"abs_set.lua, set of 3, TIME, 50 keys|../scripts/abs_set.lua|time|$AS|EMPTY 1 $ASET"
	"abs_set.lua, set of 3, TIME, joins, 50 keys|../scripts/abs_set.lua|time|$AJ|EMPTY 1 $ASETJ"
	"sup_inc.lua, single, join|../scripts/sup_inc.lua|join|$SK|$SUP"
	"sup_set.lua, set of 3, join|../scripts/sup_set.lua|join|$SS|NOW $SSET"
	"sup_inc.lua, single, overloaded|../scripts/sup_inc.lua|overload|$SK|$SUPO"
	"sup_set.lua, set of 3, overloaded|../scripts/sup_set.lua|overload|$SS|NOW $SSETO"
	"sup_inc.lua, single, TIME, 50 keys|../scripts/sup_inc.lua|time|$SK|$TS"
	"sup_set.lua, set of 3, TIME, 50 keys|../scripts/sup_set.lua|time|$SS|EMPTY $SSET"
	"sup_set.lua, set of 3, TIME, joins, 50 keys|../scripts/sup_set.lua|time|$SJ|EMPTY $SSETJ"
	"floor: return 1, the set's 3 keys and 14 arguments|floor/return1.lua|join|$AS|NOW 1 $ASET"
	"floor: set_cmds.lua on 1 hash|floor/set_cmds.lua|join|$AK|$ABS"
	"floor: set_cmds.lua on the set's 3 hashes|floor/set_cmds.lua|join|$AS|NOW 1 $ASET"
	"floor: set_parse.lua on the set's 3 hashes|floor/set_parse.lua|join|$AS|NOW 1 $ASET"
	"floor: set_parse_struct.lua on the set's 3 hashes|floor/set_parse_struct.lua|join|$AS|NOW 1 $ASET"
	"floor: set_parse_keep.lua on 1 hash|floor/set_parse_keep.lua|join|$AK|NOW 1 60000 600 1000 60600"
	"floor: set_parse_keep.lua on the set's 3 hashes|floor/set_parse_keep.lua|join|$AJ|NOW 1 $ASETJ"
	"floor: set_meta.lua, the 3 limits' meta in one hash|floor/set_meta.lua|join|$AM|NOW 1 $ASETJ"
	"floor: set_meta_cmds.lua, its commands alone|floor/set_meta_cmds.lua|join|$AM|NOW 1 $ASETJ"
	"floor: set_counter.lua, one admission counter for the set's 3 hashes|floor/set_counter.lua|join|$AJ|NOW 1 $ASETJ"
	"floor: time1.lua, TIME alone, the single's 1 key and 6 arguments|floor/time1.lua|join|$AK|$ABS"
	"floor: time1.lua, TIME alone, the set's 3 keys and 14 arguments|floor/time1.lua|join|$AJ|NOW 1 $ASETJ"
)
if [[ -n $rev ]]; then
	rows+=(
		"abs_set.lua at $rev, set of 3, join|$tmp/abs_set_rev.lua|join|$AS|NOW 1 $ASET"
		"abs_set.lua at $rev, set of 3, refused|$tmp/abs_set_rev.lua|join|$AS|NOW 1 $ASETR"
		"abs_set.lua at $rev, set of 3, TIME, 50 keys|$tmp/abs_set_rev.lua|time|$AS|EMPTY 1 $ASET"
		"abs_set.lua at $rev, set of 3, TIME, joins, 50 keys|$tmp/abs_set_rev.lua|time|$AJ|EMPTY 1 $ASETJ"
		"sup_set.lua at $rev, set of 3, join|$tmp/sup_set_rev.lua|join|$SS|NOW $SSET"
		"sup_set.lua at $rev, set of 3, overloaded|$tmp/sup_set_rev.lua|overload|$SS|NOW $SSETO"
		"sup_set.lua at $rev, set of 3, TIME, 50 keys|$tmp/sup_set_rev.lua|time|$SS|EMPTY $SSET"
		"sup_set.lua at $rev, set of 3, TIME, joins, 50 keys|$tmp/sup_set_rev.lua|time|$SJ|EMPTY $SSETJ"
	)
fi

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), valgrind $(valgrind --version)"
echo
echo "| script, path | instructions per call |"
echo "| --- | ---: |"
for r in "${rows[@]}"; do
	IFS='|' read -r name file mode keyfmt args <<<"$r"
	[[ -z ${INSTR_ONLY:-} || $name =~ $INSTR_ONLY ]] || continue
	case $mode in
	overload) n=$(count "$file" steady "$keyfmt" "$args" 20 3000 1000 1) ;;
	steady) n=$(count "$file" "$mode" "$keyfmt" "$args" 200 260 40) ;;
	path1s) n=$(count "$file" steady "$keyfmt" "$args" 1000 16 10 200) ;;
	full) n=$(count "$file" steady "$keyfmt" "$args" 100 120 10 10) ;;
	everyms) n=$(count "$file" steady "$keyfmt" "$args" 20 1100 100 1) ;;
	time) n=$(count "$file" join "$keyfmt" "$args" 50 21) ;;
	timesat) n=$(count "$file" join "$keyfmt" "$args" 5 2000 1000) ;;
	*) n=$(count "$file" "$mode" "$keyfmt" "$args") ;;
	esac
	echo "| $name | $n |"
done
