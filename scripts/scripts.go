// Package scripts holds sluice's Redis Lua scripts, embedded from the .lua
// files beside this one, one redis.Script each. Each file's header comment
// lists its KEYS, ARGV and reply; docs/data-model.md describes the keys and
// fields they share.
//
// A function some scripts share is written once in a file of its own,
// whose header names the scripts that include it ("-- Included by:"). A
// script's line "-- include <file>" stands for that file's text, which the
// text sent to Redis has in its place (Redis has no include).
//
// Scripts are run with (*redis.Script).Run: EVALSHA, and EVAL when the
// server answers NOSCRIPT. Arguments are integers only and no script calls
// math.random, so they run the same on Redis 6.2 and later and under
// effects replication.
package scripts

import (
	"embed"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// include matches a script's line that stands for a shared file's text.
var include = regexp.MustCompile(`(?m)^[ \t]*-- include ([a-z_]+\.lua)$`)

func script(name string) *redis.Script {
	src, _ := source(name)
	return redis.NewScript(src)
}

// source returns the named script as it is sent to Redis, its includes in
// place, and the files it includes.
func source(name string) (string, []string) {
	var inc []string
	src := include.ReplaceAllStringFunc(read(name), func(line string) string {
		f := include.FindStringSubmatch(line)[1]
		inc = append(inc, f)
		return strings.TrimSuffix(read(f), "\n")
	})
	return src, inc
}

func read(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("scripts: " + err.Error())
	}
	return string(b)
}

// AbsInc decides one Inc (or, with capacity 0, one IsAllowed) of the
// absolute strategy. See abs_inc.lua.
var AbsInc = script("abs_inc.lua")

// AbsGet reads a key's usage under the absolute strategy, single or a
// set's, without writing. See abs_get.lua.
var AbsGet = script("abs_get.lua")

// AbsSet decides one call of the absolute strategy on a set of limits, all
// or nothing, over one hash per limit. See abs_set.lua.
var AbsSet = script("abs_set.lua")
