//go:build race

package seams

// raceEnabled: the race detector slows every call by 5 to 20 times.
const raceEnabled = true
