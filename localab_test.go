package sluice_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"sync"
	"testing"

	"github.com/sluice-go/sluice/internal/window"
)

var (
	localABPairs = flag.Int("local.ab", 0, "TestLocalAB: sets of blocks per row; 0 skips it")
	localABCalls = flag.Int("local.ab.calls", 200_000, "TestLocalAB: calls per block")
)

// TestLocalAB runs the contenders of BenchmarkLocal on each of its rows
// in sets of blocks: each set runs a block of calls of every contender
// (in an order rotated from set to set) and a block of default draws, so
// that a load that comes and goes on a shared machine falls on the whole
// set alike. Per row it prints the medians over the sets of the per-set
// ratios, in process CPU time per call: local absolute over the better
// x/time/rate variant of the set, and local suppressed over local absolute
// plus the draw, each with its lowest and highest set. TestLocalCompare's
// ratios of medians, whose samples lie seconds apart, move by ±15 % and
// more on a loaded machine; these are the figures to read there.
//
//	go test -run TestLocalAB -local.ab 30 -v .
func TestLocalAB(t *testing.T) {
	if *localABPairs <= 0 {
		t.Skip("run with -local.ab N")
	}
	re, err := regexp.Compile(*localRowsRE)
	if err != nil {
		t.Fatalf("-local.rows: %v", err)
	}
	calls := *localABCalls
	fmt.Printf("%-40s %7s %7s %7s %7s %5s %6s %13s %9s %13s\n", "row", "abs", "sup", "x-mutex", "x-sync", "draw",
		"abs/x", "lowest–highest", "sup/(a+d)", "lowest–highest")
	for _, row := range localRows() {
		if !re.MatchString(row.String()) {
			continue
		}
		setBallast(row.heap)
		ks := keys[:row.keys]
		per := make([][]float64, len(contenders))
		var draws, absX, supAD []float64
		for p := 0; p < *localABPairs; p++ {
			got := make([]float64, len(contenders))
			for i := range contenders {
				j := (i + p) % len(contenders)
				got[j] = timeLocalBlock(t, contenders[j], ks, row, calls)
				per[j] = append(per[j], got[j])
			}
			d := timeDrawBlock(calls)
			draws = append(draws, d)
			absX = append(absX, got[0]/min(got[2], got[3]))
			supAD = append(supAD, got[1]/(got[0]+d))
		}
		fmt.Printf("%-40s %7.1f %7.1f %7.1f %7.1f %5.1f %6.3f %13s %9.3f %13s\n", row,
			median(per[0]), median(per[1]), median(per[2]), median(per[3]), median(draws),
			median(absX), span(absX), median(supAD), span(supAD))
	}
	setBallast(false)
}

// span formats the lowest and highest of xs.
func span(xs []float64) string {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

// timeLocalBlock returns the process CPU time per call of calls calls of
// ct over ks from row.g goroutines, on a new limiter (fresh: every first
// touch timed) or one whose keys were each called once (warm), after a
// collection so that no garbage of the block before is collected on this
// block's time.
func timeLocalBlock(t *testing.T, ct contender, ks []string, row localRow, calls int) float64 {
	allow, release := ct.build(t)
	defer release()
	if !row.fresh {
		for _, k := range ks {
			allow(k)
		}
	}
	runtime.GC()
	var refused int
	var mu sync.Mutex
	start := processCPU()
	if row.g == 1 {
		for i := 0; i < calls; i++ {
			if !allow(ks[i%len(ks)]) {
				refused++
			}
		}
	} else {
		var wg sync.WaitGroup
		per := calls / row.g
		for g := 0; g < row.g; g++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				n := 0
				for j := 0; j < per; j++ {
					i++
					if !allow(ks[i%len(ks)]) {
						n++
					}
				}
				mu.Lock()
				refused += n
				mu.Unlock()
			}(g * 7919)
		}
		wg.Wait()
		calls = per * row.g
	}
	cpu := processCPU() - start
	if refused != 0 {
		t.Fatalf("%s %s: %d calls refused: the test must measure admissions", row, ct.name, refused)
	}
	return float64(cpu) / float64(calls)
}

// timeDrawBlock returns the process CPU time per default draw, as
// BenchmarkLocalDraw measures it.
func timeDrawBlock(calls int) float64 {
	var sum int64
	start := processCPU()
	for i := 0; i < calls; i++ {
		sum += window.DrawPPM(rand.Float64())
	}
	cpu := processCPU() - start
	if sum == 0 {
		panic("every draw was 0")
	}
	return float64(cpu) / float64(calls)
}
