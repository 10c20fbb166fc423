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
	localABPairs = flag.Int("local.ab", 0, "TestLocalSupAB: pairs of blocks per row; 0 skips it")
	localABCalls = flag.Int("local.ab.calls", 200_000, "TestLocalSupAB: calls per block")
)

// TestLocalSupAB puts the local suppressed strategy beside the absolute
// one on every row of BenchmarkLocal, paired block by block: each pair
// runs a block of calls on each (in an order that alternates from pair to
// pair) and a block of default draws, so that a load that comes and goes
// on a shared machine falls on both sides of a pair alike. Per row it
// prints the median over the pairs of suppressed ÷ (absolute + draw), in
// process CPU time per call, with the lowest and highest pair. TestLocalCompare's
// ratio of medians, whose samples lie seconds apart, moves by ±15 % on a
// loaded machine; this one is the figure to read for the suppressed
// strategy's cost.
//
//	go test -run TestLocalSupAB -local.ab 40 -v .
func TestLocalSupAB(t *testing.T) {
	if *localABPairs <= 0 {
		t.Skip("run with -local.ab N")
	}
	re, err := regexp.Compile(*localRowsRE)
	if err != nil {
		t.Fatalf("-local.rows: %v", err)
	}
	abs, sup := contenders[0], contenders[1]
	calls := *localABCalls
	fmt.Printf("%-40s %8s %8s %6s %9s %15s\n", "row", "abs", "sup", "draw", "sup/(a+d)", "lowest–highest")
	for _, row := range localRows() {
		if !re.MatchString(row.String()) {
			continue
		}
		setBallast(row.heap)
		ks := keys[:row.keys]
		var ra, rs, rd, ratios []float64
		for p := 0; p < *localABPairs; p++ {
			var a, s float64
			if p%2 == 0 {
				a = timeLocalBlock(t, abs, ks, row, calls)
				s = timeLocalBlock(t, sup, ks, row, calls)
			} else {
				s = timeLocalBlock(t, sup, ks, row, calls)
				a = timeLocalBlock(t, abs, ks, row, calls)
			}
			d := timeDrawBlock(calls)
			ra, rs, rd = append(ra, a), append(rs, s), append(rd, d)
			ratios = append(ratios, s/(a+d))
		}
		lo, hi := ratios[0], ratios[0]
		for _, r := range ratios {
			lo, hi = min(lo, r), max(hi, r)
		}
		fmt.Printf("%-40s %8.1f %8.1f %6.1f %9.3f %7.3f–%.3f\n", row, median(ra), median(rs), median(rd), median(ratios), lo, hi)
	}
	setBallast(false)
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
