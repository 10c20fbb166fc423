//go:build race

package sluice_test

const raceEnabled = true
