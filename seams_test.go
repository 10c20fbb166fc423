package sluice_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/seams"
)

// The fleet's seams (internal/seams), on the go-redis version go.mod
// requires; module compat runs them on the newest.

func TestMemoryStaleness(t *testing.T)   { seams.RunMemoryStaleness(t) }
func TestOutageOnset(t *testing.T)       { seams.RunOutageOnset(t) }
func TestFreezeWithHotKeys(t *testing.T) { seams.RunFreezeWithHotKeys(t) }
func TestProbeClientQuiet(t *testing.T)  { seams.RunProbeClientQuiet(t) }
func TestEvictionWarning(t *testing.T)   { seams.RunEvictionWarning(t) }
func TestLeaseStaleness(t *testing.T)    { seams.RunLeaseStaleness(t) }
func TestSlowKey(t *testing.T)           { seams.RunSlowKey(t) }
func TestClusterByNode(t *testing.T)     { seams.RunClusterByNode(t) }
