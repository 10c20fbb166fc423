//go:build !race

package seams

const raceEnabled = false
