//go:build race

package faults

// raceEnabled: the race detector slows every call by 5 to 20 times.
const raceEnabled = true
