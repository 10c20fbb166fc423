package redistest

import "github.com/sluice-go/sluice/limiter"

// Policy is a failure policy and the name a subtest runs it under.
type Policy struct {
	Name string
	P    limiter.FailurePolicy
}

// Policies lists every failure policy with its name, for tests that run
// once per policy (FailurePolicy has no String method).
var Policies = []Policy{
	{"FallbackLocal", limiter.FallbackLocal}, {"FailOpen", limiter.FailOpen},
	{"FailClosed", limiter.FailClosed}, {"FailError", limiter.FailError},
}
