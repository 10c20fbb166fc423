// Package scripts holds sluice's Redis Lua scripts, embedded from the .lua
// files beside this one, one redis.Script each. Each file's header comment
// lists its KEYS, ARGV and reply; docs/data-model.md describes the keys and
// fields they share.
//
// Some scripts share functions, each written once in a file of its own
// whose header names the scripts that include it ("-- Included by:"). A
// script includes one with a line "-- include <file>", which the text sent
// to Redis has in its place (Redis has no include): the function is made
// where the script needs it, so a call that never needs it makes no
// closure.
//
// Scripts are run with (*redis.Script).Run: EVALSHA, and EVAL when the
// server answers NOSCRIPT (after a restart or SCRIPT FLUSH). Arguments are
// integers only and scripts never call math.random, so they run the same
// on Redis 6.2 and later and under effects replication.
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

// script returns the redis.Script of the named file (see source).
func script(name string) *redis.Script {
	src, _ := source(name)
	return redis.NewScript(src)
}

// source returns the text of the named script as it is sent to Redis, each
// of its "-- include" lines replaced by the text of the file it names, and
// the files it includes.
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

// AbsGet reads a key's usage under the absolute strategy without writing.
// See abs_get.lua.
var AbsGet = script("abs_get.lua")

// AbsSet decides one call of the absolute strategy on a set of limits, all
// or nothing, over one hash per limit. See abs_set.lua. AbsGet reads the
// same hashes.
var AbsSet = script("abs_set.lua")
