package scripts

import (
	_ "embed" // the .lua files

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed sup_inc.lua
	supIncSrc string
	//go:embed sup_allowed.lua
	supAllowedSrc string
	//go:embed sup_get.lua
	supGetSrc string
)

// Scripts of the suppressed strategy (limiter/redissup). Each file's header
// lists its KEYS, ARGV and reply.
var (
	// SupInc is one suppressed Inc: decide, record, cache the factor,
	// PEXPIRE the hash (sup_inc.lua). A peek (n = 0) writes nothing.
	SupInc = redis.NewScript(supIncSrc)
	// SupAllowed is the read-only IsAllowed (sup_allowed.lua).
	SupAllowed = redis.NewScript(supAllowedSrc)
	// SupGet is the read-only usage query (sup_get.lua).
	SupGet = redis.NewScript(supGetSrc)
)
