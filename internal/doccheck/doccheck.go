// Package doccheck checks figures printed in the repository's docs against
// the tests that measure them, so a table cannot go stale unnoticed.
//
// The memory tables of docs/data-model.md ("Memory per key", one per
// strategy) and docs/operations.md ("Memory per key") are Markdown tables
// whose header has a "strategy" column, a "workload" column, a column whose
// name contains "used_memory" (bytes per key), one whose name contains
// "MEMORY USAGE" (bytes per hash) and optionally a "fields" column. Every
// row is one (strategy, workload) pair of Workloads, measured by
// TestMemoryPerKey in limiter/redisabs or limiter/redissup, which calls
// CheckMemory with its figures.
package doccheck

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// MemoryDocs are the files, relative to the repository root, whose memory
// tables CheckMemory compares.
var MemoryDocs = []string{"docs/data-model.md", "docs/operations.md"}

// The workloads of the memory tables, as their "workload" cells name them:
// 10,000 keys under 10 per minute (W = 1 min, B = 600 ms).
const (
	OneBucket   = "5 requests within 600 ms (one bucket)"
	FiveBuckets = "5 requests 1 s apart (five buckets)"
	// Suppressed20 is the suppressed strategy under F = 1.5.
	Suppressed20 = "20 requests 1 s apart, F = 1.5 (15 admitted, 5 refused, factor cached)"
)

// Workloads lists, per strategy, the rows every memory table must have.
var Workloads = map[string][]string{
	"absolute":   {OneBucket, FiveBuckets},
	"suppressed": {OneBucket, FiveBuckets, Suppressed20},
}

// Memory is one measured row.
type Memory struct {
	Strategy, Workload string
	PerKey             float64 // INFO memory used_memory delta per key, bytes
	Usage              int64   // mean MEMORY USAGE of one hash, bytes
	Fields             float64 // mean HLEN of one hash
}

// Row is one row of a memory table as a doc prints it; Fields is −1 when
// the table has no fields column.
type Row struct {
	Doc, Strategy, Workload string
	PerKey, Usage           int64
	Fields                  float64
	Line                    int
}

// Root returns the repository root: the nearest directory at or above the
// working directory whose go.mod declares module
// github.com/sluice-go/sluice.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/sluice-go/sluice\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module github.com/sluice-go/sluice above the working directory")
		}
		dir = parent
	}
}

var (
	leadingInt = regexp.MustCompile(`^[0-9][0-9,]*`)
	measuredOn = regexp.MustCompile(`redis-server (\d+\.\d+\.\d+)`)
)

// MemoryTables returns the rows of every memory table of doc (a path
// relative to root) and the Redis version the doc says it measured on
// (the first "redis-server X.Y.Z" of its text).
func MemoryTables(root, doc string) (rows []Row, version string, err error) {
	f, err := os.Open(filepath.Join(root, doc))
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var header []string
	cols := map[string]int{}
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if version == "" {
			if m := measuredOn.FindStringSubmatch(line); m != nil {
				version = m[1]
			}
		}
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
			clear(cols)
			for i, h := range cells {
				switch {
				case h == "strategy":
					cols["strategy"] = i
				case strings.HasPrefix(h, "workload"):
					cols["workload"] = i
				case strings.Contains(h, "used_memory"):
					cols["perKey"] = i
				case strings.Contains(h, "MEMORY USAGE"):
					cols["usage"] = i
				case h == "fields":
					cols["fields"] = i
				}
			}
			continue
		case strings.HasPrefix(cells[0], "---"):
			continue
		}
		if _, ok := cols["perKey"]; !ok {
			continue // not a memory table
		}
		for _, c := range []string{"strategy", "workload", "usage"} {
			if _, ok := cols[c]; !ok {
				return nil, "", fmt.Errorf("%s:%d: a memory table without a %q column", doc, n, c)
			}
		}
		if len(cells) != len(header) {
			return nil, "", fmt.Errorf("%s:%d: %d cells, the header has %d", doc, n, len(cells), len(header))
		}
		r := Row{Doc: doc, Line: n, Strategy: cells[cols["strategy"]], Workload: cells[cols["workload"]], Fields: -1}
		if r.PerKey, err = bytesCell(cells[cols["perKey"]]); err != nil {
			return nil, "", fmt.Errorf("%s:%d: %v", doc, n, err)
		}
		if r.Usage, err = bytesCell(cells[cols["usage"]]); err != nil {
			return nil, "", fmt.Errorf("%s:%d: %v", doc, n, err)
		}
		if i, ok := cols["fields"]; ok {
			if r.Fields, err = strconv.ParseFloat(cells[i], 64); err != nil {
				return nil, "", fmt.Errorf("%s:%d: fields %q: %v", doc, n, cells[i], err)
			}
		}
		rows = append(rows, r)
	}
	return rows, version, sc.Err()
}

func bytesCell(s string) (int64, error) {
	m := leadingInt.FindString(s)
	if m == "" {
		return 0, fmt.Errorf("cell %q does not start with a number of bytes", s)
	}
	return strconv.ParseInt(strings.ReplaceAll(m, ",", ""), 10, 64)
}

// Tolerances of CheckMemory. Allocator state moves the used_memory delta
// by a byte or two between runs, and under suppression the random draws
// (whose order across goroutines varies) move the mean field count by a
// tenth; MEMORY USAGE is all but exact for a given Redis version.
const (
	perKeySlack = 0.03 // of the measured figure, and at least minSlack bytes
	minSlack    = 4
	usageSlack  = 2   // bytes
	fieldsSlack = 0.5 // fields: the doc rounds the mean
)

// CheckMemory compares m with its row in every memory table of MemoryDocs
// and fails t when a row is missing or differs by more than the
// tolerances, with the figures to write. The docs give figures for one
// Redis version; on a server of another minor version the comparison is
// logged and skipped, since each version lays hashes out its own way.
func CheckMemory(t testing.TB, c *redis.Client, m Memory) {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	server, err := serverVersion(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range MemoryDocs {
		rows, version, err := MemoryTables(root, doc)
		if err != nil {
			t.Fatal(err)
		}
		if minor(version) != minor(server) {
			t.Logf("%s gives figures for redis-server %s; this server is %s: not compared", doc, version, server)
			continue
		}
		found := false
		for _, r := range rows {
			if r.Strategy != m.Strategy || r.Workload != m.Workload {
				continue
			}
			found = true
			if d := math.Abs(float64(r.PerKey) - m.PerKey); d > max(minSlack, perKeySlack*m.PerKey) {
				t.Errorf("%s:%d (%s, %s): %d bytes per key, measured %.0f: update the doc", doc, r.Line, m.Strategy, m.Workload, r.PerKey, m.PerKey)
			}
			if d := r.Usage - m.Usage; d > usageSlack || d < -usageSlack {
				t.Errorf("%s:%d (%s, %s): MEMORY USAGE %d bytes, measured %d: update the doc", doc, r.Line, m.Strategy, m.Workload, r.Usage, m.Usage)
			}
			if r.Fields >= 0 && math.Abs(r.Fields-m.Fields) > fieldsSlack {
				t.Errorf("%s:%d (%s, %s): %g fields, measured %.1f: update the doc", doc, r.Line, m.Strategy, m.Workload, r.Fields, m.Fields)
			}
		}
		if !found {
			t.Errorf("%s has no memory-table row for %s, %q (measured %.0f bytes per key, MEMORY USAGE %d, %.1f fields)",
				doc, m.Strategy, m.Workload, m.PerKey, m.Usage, m.Fields)
		}
	}
}

// KeyMemory reads the memory a Redis server holds for its keys: INFO
// memory's used_memory less mem_clients_normal, the connections' query and
// reply buffers. Those buffers grow with the commands in flight (a pipeline
// of a hundred script calls fills them) and shrink in the background, so
// the raw used_memory of a server with pooled connections moves by tens of
// bytes per key between two readings that wrote nothing.
func KeyMemory(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var used, clients int64 = -1, -1
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			used, err = strconv.ParseInt(v, 10, 64)
		case "mem_clients_normal":
			clients, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil {
			t.Fatalf("INFO memory %s: %v", k, err)
		}
	}
	if used < 0 || clients < 0 {
		t.Fatalf("INFO memory has no used_memory or mem_clients_normal:\n%s", info)
	}
	return used - clients
}

func serverVersion(c *redis.Client) (string, error) {
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no redis_version in INFO server")
}

// minor is X.Y of version X.Y.Z.
func minor(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}
