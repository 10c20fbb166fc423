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
	// Foreign: the key matches <prefix>:{* but key.Parse does not read it
	// as a sluice key (not of the key schema, or of another prefix). The
	// failure policy's probe hash, <prefix>:{%probe}:abs:h, is not
	// Foreign: a pass reads it as the absolute hash it is, kept while its
	// unit is live and deleted once it has expired.
	Foreign Reason = iota
	// UnknownStrategy: a sluice key name of a strategy other than abs and
	// sup.
	UnknownStrategy
	// UnknownLayout: a key name of the schema that is not a limiter hash
	// this version reads: the reserved second key (suffix "a"), another
	// Redis type, or a hash without readable meta fields (an earlier
	// layout, or written by something else).
	UnknownLayout
	// NoWindow: a limiter hash whose window no option tells. It is never
	// deleted or trimmed; if it had no TTL it got one (Report.TTLSet).
	NoWindow
	// Gone: the key disappeared between SCAN and its turn (it expired, or
	// Reset or a limiter removed it).
	Gone
	// Failed: Redis answered the key's script with an error (a bucket
	// value that is not a number; MOVED during a cluster resharding). The
	// pass goes on with the next key.
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
// key SCAN returned counts once in Scanned and once in exactly one of
// Live, Deleted, Unlinked or Skipped; TTLSet and Trimmed count some of the
// Live keys again (TTLSet also the NoWindow ones). A key SCAN returns
// twice (Redis resized its table) is counted and handled twice, the second
// time changing nothing.
type Report struct {
	// CleanupReport holds what an observer's "cleanup" Event carries:
	// Scanned, the keys SCAN returned and the pass handled; Deleted, the
	// limiter hashes with no live bucket, UNLINKed (dry run: that would
	// be), judged by the window each records; Trimmed, the live hashes
	// whose dead buckets were removed; Duration, how long the pass took;
	// Err and ErrorClass, why the pass stopped before the end (the error
	// Run returns) and its class.
	limiter.CleanupReport
	// Prefix is the prefix walked; DryRun says nothing was written.
	Prefix string
	DryRun bool
	// Nodes is the number of Redis servers walked: every master of a
	// cluster, every shard of a ring, or 1.
	Nodes int
	// Live counts limiter hashes with a live bucket, kept.
	Live int64
	// Deletions lists the first MaxListed of the Deleted hashes.
	Deletions []Deletion
	// TTLSet counts hashes that had no TTL and were given one.
	TTLSet int64
	// Buckets counts the buckets removed from the Trimmed hashes.
	Buckets int64
	// Unlinked counts keys of Foreign, UnknownStrategy or UnknownLayout
	// deleted because WithDeleteUnknown named them.
	Unlinked int64
	// Skipped counts the keys left alone, by reason (nil when none), and
	// Examples names up to five of them per reason.
	Skipped  map[Reason]int64
	Examples map[Reason][]string
	// LeaseLost is true when the pass stopped early because its lease
	// expired or was taken over (Run then returns ErrLeaseLost).
	LeaseLost bool
}

// MaxListed is the most deletions a Report lists (Report.Deletions).
const MaxListed = 1000

// Deletion is one hash a pass deleted, or in a dry run would delete:
// its Redis key, the window and bucket it records (Bucket 0: a set's
// limit's hash written before the record, whose Window is its recorded
// W + B), and the TTL it had left (-1: none).
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

// skip counts n keys left alone for why, keeping the first examples of
// ks.
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

// SkippedTotal returns the number of keys left alone, all reasons.
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
			break // a dry run lists what it would delete
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
			fmt.Fprintf(&b, "    %-22s %d  e.g. %s\n", why.String()+":", n, strings.Join(quote(r.Examples[why]), " "))
		}
	}
	if r.LeaseLost {
		fmt.Fprintf(&b, "  stopped early: the lease was lost to another cleaner\n")
	}
	return b.String()
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
