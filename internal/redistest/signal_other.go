//go:build !unix

package redistest

import "os"

// Without Unix signals a server is killed outright and cannot be paused.
var (
	sigTerm os.Signal = os.Kill
	sigStop os.Signal
	sigCont os.Signal
)
