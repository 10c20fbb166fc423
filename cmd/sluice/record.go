package main

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// counts are the decisions of one provider (or of one of its keys), in
// requests.
type counts struct {
	offered    atomic.Int64
	allowed    atomic.Int64 // admitted, with or without suppression
	rejected   atomic.Int64 // refused by the absolute strategy
	suppressed atomic.Int64 // refused by the suppressed strategy
	errors     atomic.Int64 // calls that returned an error
	degraded   atomic.Int64 // decisions not from Redis (Decision.Degraded)
}

// Counts is a snapshot of counts.
type Counts struct {
	Offered, Allowed, Rejected, Suppressed, Errors int64
	// Degraded counts the decisions, among the others, that the failure
	// policy made without Redis (the local fallback).
	Degraded int64
}

func (c *counts) snapshot() Counts {
	return Counts{
		Offered:    c.offered.Load(),
		Allowed:    c.allowed.Load(),
		Rejected:   c.rejected.Load(),
		Suppressed: c.suppressed.Load(),
		Errors:     c.errors.Load(),
		Degraded:   c.degraded.Load(),
	}
}

// Sub returns c − o, the decisions between two snapshots.
func (c Counts) Sub(o Counts) Counts {
	return Counts{
		Offered:    c.Offered - o.Offered,
		Allowed:    c.Allowed - o.Allowed,
		Rejected:   c.Rejected - o.Rejected,
		Suppressed: c.Suppressed - o.Suppressed,
		Errors:     c.Errors - o.Errors,
		Degraded:   c.Degraded - o.Degraded,
	}
}

// histogram is a log-linear latency histogram: 16 buckets per power of two
// of nanoseconds, so a quantile is read within about 4.4 %. The zero value
// is empty and ready.
type histogram struct {
	n      int64
	bucket [64 * histSub]int64
}

const histSub = 16

func histIndex(d time.Duration) int {
	ns := uint64(d)
	if ns < histSub {
		return int(ns) // exact below 16 ns
	}
	e := bits.Len64(ns) - 1              // ns in [2^e, 2^(e+1))
	m := (ns >> (e - 4)) & (histSub - 1) // next four bits
	return e*histSub + int(m)
}

// histValue is the middle of bucket i.
func histValue(i int) time.Duration {
	if i < histSub {
		return time.Duration(i)
	}
	e, m := i/histSub, i%histSub
	lo := math.Ldexp(float64(histSub+m), e-4)
	hi := math.Ldexp(float64(histSub+m+1), e-4)
	return time.Duration((lo + hi) / 2)
}

func (h *histogram) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.bucket[histIndex(d)]++
	h.n++
}

// quantile returns the q-quantile (0 < q ≤ 1), 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen int64
	for i, c := range h.bucket {
		seen += c
		if seen >= rank {
			return histValue(i)
		}
	}
	return histValue(len(h.bucket) - 1)
}

// latencies keeps a provider's decision latencies for the current interval
// of the live table and for the whole run. Safe for concurrent use.
type latencies struct {
	mu       sync.Mutex
	interval histogram
	total    histogram
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.interval.add(d)
	l.total.add(d)
	l.mu.Unlock()
}

// takeInterval returns the p50 and p99 of the interval and starts a new one.
func (l *latencies) takeInterval() (p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p50, p99 = l.interval.quantile(0.50), l.interval.quantile(0.99)
	l.interval = histogram{}
	return p50, p99
}

func (l *latencies) totals() (p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total.quantile(0.50), l.total.quantile(0.99)
}

// admission is n units admitted at ms (the instant the provider decided at).
type admission struct {
	ms, n int64
}

// maxWindow tracks, over a stream of admissions in non-decreasing time
// order, the most units admitted in any window of span ms: any half-open
// interval [t, t + span). A window that holds the most can be slid to end
// just after an admission, so checking after each admission is exact: the
// window ending at x holds the admissions with x − span < ms ≤ x. This is
// check.MostInAnyWindow over the same admissions (at their whole
// milliseconds), computed as they arrive, in memory bounded by the
// admissions of one window.
type maxWindow struct {
	span int64
	q    []admission
	head int
	sum  int64
	max  int64
}

func newMaxWindow(span int64) *maxWindow { return &maxWindow{span: span} }

func (m *maxWindow) add(a admission) {
	m.q = append(m.q, a)
	m.sum += a.n
	for m.q[m.head].ms <= a.ms-m.span {
		m.sum -= m.q[m.head].n
		m.head++
	}
	m.max = max(m.max, m.sum)
	// Drop what the window no longer needs.
	if m.head > 1024 && m.head > len(m.q)/2 {
		n := copy(m.q, m.q[m.head:])
		m.q = m.q[:n]
		m.head = 0
	}
}
