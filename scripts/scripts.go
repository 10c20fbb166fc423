// Package scripts holds sluice's Redis Lua scripts, embedded from the .lua
// files beside this one, one redis.Script each. Each file's header comment
// lists its KEYS, ARGV and reply; docs/data-model.md describes the keys and
// fields they share.
//
// Scripts are run with (*redis.Script).Run: EVALSHA, and EVAL when the
// server answers NOSCRIPT (after a restart or SCRIPT FLUSH). Arguments are
// integers only and scripts never call math.random, so they run the same
// on Redis 6.2 and later and under effects replication.
package scripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed abs_inc.lua
	absIncSrc string
	//go:embed abs_get.lua
	absGetSrc string
	//go:embed abs_set.lua
	absSetSrc string
)

// AbsInc decides one Inc (or, with capacity 0, one IsAllowed) of the
// absolute strategy. See abs_inc.lua.
var AbsInc = redis.NewScript(absIncSrc)

// AbsGet reads a key's usage under the absolute strategy without writing.
// See abs_get.lua.
var AbsGet = redis.NewScript(absGetSrc)

// AbsSet decides one call of the absolute strategy on a set of limits, all
// or nothing, over one hash per limit. See abs_set.lua. AbsGet reads the
// same hashes.
var AbsSet = redis.NewScript(absSetSrc)
