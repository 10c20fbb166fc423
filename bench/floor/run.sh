#!/usr/bin/env bash
# Server time per script call, measured inside Redis with no Go client in
# the way: redis-benchmark sends EVALSHA over 10,000 keys from 32
# connections, and INFO commandstats gives usec_per_call. It puts sluice's
# abs_inc.lua beside redis_rate's script and beside scripts that make only
# the commands a design must make (see the .lua files here), to show where
# the floor is. It prints usec_per_call per script and round.
#
#   cd bench && bash floor/run.sh [rounds] [calls]
#
# Needs redis-server and redis-benchmark (Debian: redis-server, redis-tools)
# and Go (to find redis_rate's source in the module cache).
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
calls=${2:-300000}

rr_dir=$(cd .. && go list -m -f '{{.Dir}}' github.com/go-redis/redis_rate/v10)
tmp=$(mktemp -d)
awk '/var allowN = redis.NewScript\(`/{f=1;next} /^`\)/{if(f){exit}} f' "$rr_dir/lua.go" >"$tmp/redis_rate.lua"
# The absolute script before its newest bucket moved into meta fields.
git show d6b9899:scripts/abs_inc.lua >"$tmp/abs_inc_d6b9899.lua"

port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
	--pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log" --dir "$tmp"
trap 'kill "$(cat "$tmp/redis.pid")" 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

cli() { redis-cli -p "$port" "$@"; }

# name | script | key pattern | ARGV: every call admitted, as in TestCompare's 10k workload
variants=(
	"return 1|return1.lua|k:__rand_int__|"
	"TIME+GET+SET PX, no logic|syn_string.lua|k:__rand_int__|"
	"TIME+HMGET+HINCRBY+HSET, no logic|syn_hash_noexpire.lua|k:__rand_int__|"
	"TIME+HMGET+HINCRBY+HSET+PEXPIRE, no logic|syn_hash.lua|k:__rand_int__|"
	"redis_rate allowN (GCRA)|$tmp/redis_rate.lua|rate:user:__rand_int__|1000 1000 60 1"
	"sluice abs_inc.lua|../../scripts/abs_inc.lua|sluice:{user:__rand_int__}:abs:h|EMPTY 60000 600 1000 1 60600"
	"sluice abs_inc.lua at d6b9899 (newest bucket as a field)|$tmp/abs_inc_d6b9899.lua|sluice:{user:__rand_int__}:abs:h|0 60000 600 1000 1 60600"
	"abs_string.lua prototype|abs_string.lua|sluice:{user:__rand_int__}:abs:s|EMPTY 60000 600 1000 1 60600"
)

lua() { # file → the script's text as scripts.go sends it, each "-- include <file>" line replaced by the file
	awk -v dir="$(dirname "$(readlink -f "$1")")" '/^[ \t]*-- include [a-z_]+\.lua$/ {f = dir "/" $NF; while ((getline l < f) > 0) print l; close(f); next} {print}' "$1"
}

measure() { # script keypattern args → usec_per_call; an argument EMPTY is sent empty (the script reads TIME)
	local sha a
	sha=$(cli SCRIPT LOAD "$(lua "$1")")
	read -ra a <<<"$3"
	for i in "${!a[@]}"; do [[ ${a[i]} == EMPTY ]] && a[i]=''; done
	cli FLUSHALL >/dev/null
	# A first, unmeasured pass lets the server grow its memory.
	redis-benchmark -p "$port" -n $((calls / 3)) -c 32 -r 10000 -q EVALSHA "$sha" 1 "$2" "${a[@]}" >/dev/null
	cli FLUSHALL >/dev/null
	cli CONFIG RESETSTAT >/dev/null
	redis-benchmark -p "$port" -n "$calls" -c 32 -r 10000 -q EVALSHA "$sha" 1 "$2" "${a[@]}" >/dev/null
	cli INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p'
}

declare -A samples
n=${#variants[@]}
for r in $(seq "$rounds"); do
	for i in $(seq 0 $((n - 1))); do
		v=${variants[$(((i + r) % n))]}
		IFS='|' read -r name file pattern args <<<"$v"
		samples[$name]+="$(measure "$file" "$pattern" "$args") "
	done
done

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $rounds rounds of $calls calls, 32 connections, 10,000 keys"
echo
echo "| script | server µs per call (median) | rounds |"
echo "| --- | ---: | --- |"
for v in "${variants[@]}"; do
	IFS='|' read -r name _ _ _ <<<"$v"
	med=$(tr ' ' '\n' <<<"${samples[$name]}" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	echo "| $name | $med | ${samples[$name]}|"
done
