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

var (
	//go:embed sup_set.lua
	supSetSrc string
	//go:embed sup_set_get.lua
	supSetGetSrc string
)

// Scripts of a set of suppressed limits on one key (limiter/redissup's
// IncSet and GetSet): one hash per limit, all in the key's slot.
var (
	// SupSet decides one suppressed call on a set of up to eight limits
	// as one: every limit's factor as SupInc computes it, admitted when
	// the draw is at or above the largest, the offer recorded in every
	// limit (sup_set.lua). A peek (n = 0) writes nothing.
	SupSet = redis.NewScript(supSetSrc)
	// SupSetGet is the read-only usage of each limit of a set
	// (sup_set_get.lua).
	SupSetGet = redis.NewScript(supSetGetSrc)
)
