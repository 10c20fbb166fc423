package limiter

import "time"

// WaitWith exposes waitWith to the external tests.
var WaitWith = waitWith

// PolicyName exposes policyName to the external tests.
var PolicyName = policyName

// ValidateRate exposes Rate.validate to the external tests.
var ValidateRate = Rate.validate

// DefaultWindow exposes defaultWindow to the external tests.
var DefaultWindow = defaultWindow

// Period exposes a Rate's period to the external tests.
func Period(r Rate) time.Duration { return r.period }
