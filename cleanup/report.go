package cleanup

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// Reason says why a pass left a key alone.
type Reason int

// Reasons a pass leaves a key alone.
const (
	// Foreign: a key under <prefix>:{ that key.Parse does not read as a
	// sluice key of the prefix (the failure policy's probe hash is read as
	// the absolute hash it is).
	Foreign Reason = iota
	// UnknownStrategy: a sluice key of a strategy other than abs and sup.
	UnknownStrategy
	// UnknownLayout: a key of the schema that is not a limiter hash this
	// version reads (the reserved suffix "a", another Redis type, a hash
	// without readable meta fields).
	UnknownLayout
	// NoWindow: a limiter hash whose window no option tells, never
	// deleted or trimmed; given a TTL if it had none (Report.TTLSet).
	NoWindow
	// Gone: the key disappeared between SCAN and its turn.
	Gone
	// Failed: Redis answered the key's script with an error (a bucket
	// that is not a number, MOVED); the pass goes on.
	Failed
	numReasons
)

var reasonNames = [numReasons]string{
	Foreign:         "not of the key schema",
	UnknownStrategy: "unknown strategy",
	UnknownLayout:   "unknown layout",
	NoWindow:        "no window known",
	Gone:            "gone before its turn",
	Failed:          "error",
}

func (r Reason) String() string {
	if r >= 0 && r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Report is what one pass did; its zero value is an empty report. Every
// key SCAN returned (twice, if SCAN returned it twice) counts in Scanned
// and in one of Live, Deleted, Unlinked or Skipped; TTLSet and Trimmed
// count some Live (and NoWindow) keys again.
type Report struct {
	// CleanupReport holds what a "cleanup" Event carries: Scanned keys,
	// Deleted hashes with no live bucket, Trimmed live hashes, Duration,
	// and Err and ErrorClass, why the pass stopped early.
	limiter.CleanupReport
	// Prefix is the prefix walked; DryRun says nothing was written.
	Prefix    string
	DryRun    bool
	Nodes     int        // Redis servers walked
	Live      int64      // limiter hashes with a live bucket, kept
	Deletions []Deletion // the first MaxListed of the Deleted hashes
	TTLSet    int64      // hashes without a TTL given one
	Buckets   int64      // buckets removed from the Trimmed hashes
	Unlinked  int64      // unknown keys deleted by WithDeleteUnknown
	// Skipped counts the keys left alone, by reason (nil when none), and
	// Examples names up to five of them per reason.
	Skipped  map[Reason]int64
	Examples map[Reason][]string
	// LeaseLost: the pass stopped early, its lease lost (ErrLeaseLost).
	LeaseLost bool
}

// MaxListed is the most deletions a Report lists (Report.Deletions).
const MaxListed = 1000

// Deletion is one hash a pass deleted (or would delete): its key, the
// window and bucket it records (Bucket 0: Window is its recorded W + B),
// and the TTL it had left (-1: none).
type Deletion struct {
	Key            string
	Window, Bucket time.Duration
	TTL            time.Duration
}

// list records a deletion from clean.lua's reply res.
func (r *Report) list(k string, res []int64) {
	if len(r.Deletions) >= MaxListed {
		return
	}
	ttl := time.Duration(res[7]) * time.Millisecond
	if res[7] < 0 {
		ttl = -1
	}
	r.Deletions = append(r.Deletions, Deletion{Key: k, Window: time.Duration(res[5]) * time.Millisecond,
		Bucket: time.Duration(res[6]) * time.Millisecond, TTL: ttl})
}

// skip counts n keys left alone for why, naming the first of ks.
func (r *Report) skip(why Reason, n int64, ks ...string) {
	if r.Skipped == nil {
		r.Skipped = make(map[Reason]int64)
		r.Examples = make(map[Reason][]string)
	}
	r.Skipped[why] += n
	for _, k := range ks[:min(len(ks), examples-len(r.Examples[why]))] {
		r.Examples[why] = append(r.Examples[why], k)
	}
}

// add merges the counts of o (one node's walk) into r.
func (r *Report) add(o *Report) {
	r.Scanned += o.Scanned
	r.Live += o.Live
	r.Deleted += o.Deleted
	r.Deletions = append(r.Deletions, o.Deletions[:min(len(o.Deletions), MaxListed-len(r.Deletions))]...)
	r.TTLSet += o.TTLSet
	r.Trimmed += o.Trimmed
	r.Buckets += o.Buckets
	r.Unlinked += o.Unlinked
	r.LeaseLost = r.LeaseLost || o.LeaseLost
	for why, n := range o.Skipped {
		r.skip(why, n, o.Examples[why]...)
	}
}

// SkippedTotal returns the keys left alone, all reasons.
func (r Report) SkippedTotal() int64 {
	var n int64
	for _, v := range r.Skipped {
		n += v
	}
	return n
}

// String renders the report for a terminal, one figure a line.
func (r Report) String() string {
	var b strings.Builder
	would := ""
	if r.DryRun {
		would = " (dry run: would be)"
	}
	fmt.Fprintf(&b, "prefix %q, %d node(s), %v\n", r.Prefix, r.Nodes, r.Duration.Round(time.Millisecond))
	fmt.Fprintf(&b, "  scanned  %d keys\n", r.Scanned)
	fmt.Fprintf(&b, "  live     %d hashes kept\n", r.Live)
	fmt.Fprintf(&b, "  deleted  %d hashes with no live bucket%s\n", r.Deleted, would)
	for _, d := range r.Deletions {
		if !r.DryRun {
			break
		}
		ttl := "no TTL"
		if d.TTL >= 0 {
			ttl = "TTL " + d.TTL.String()
		}
		fmt.Fprintf(&b, "    %q  window %v, bucket %v, %s\n", d.Key, d.Window, d.Bucket, ttl)
	}
	fmt.Fprintf(&b, "  ttl      %d keys without a TTL given one%s\n", r.TTLSet, would)
	fmt.Fprintf(&b, "  trimmed  %d live hashes, %d dead buckets%s\n", r.Trimmed, r.Buckets, would)
	if r.Unlinked > 0 {
		fmt.Fprintf(&b, "  unlinked %d unknown keys named for deletion%s\n", r.Unlinked, would)
	}
	fmt.Fprintf(&b, "  skipped  %d keys\n", r.SkippedTotal())
	for why := Reason(0); why < numReasons; why++ {
		if n := r.Skipped[why]; n > 0 {
			fmt.Fprintf(&b, "    %-22s %d  e.g.", why.String()+":", n)
			for _, k := range r.Examples[why] {
				fmt.Fprintf(&b, " %q", k)
			}
			b.WriteByte('\n')
		}
	}
	if r.LeaseLost {
		fmt.Fprintf(&b, "  stopped early: the lease was lost to another cleaner\n")
	}
	return b.String()
}
