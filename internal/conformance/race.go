//go:build race

package conformance

// raceEnabled: the race detector slows every call by 5 to 20 times, the
// memory path of hot-key relief among them.
const raceEnabled = true
