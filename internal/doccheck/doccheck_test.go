package doccheck

import (
	"fmt"
	"testing"
)

// TestMemoryTables checks, without a server, that every memory table of
// MemoryDocs has exactly the rows of Workloads, that the docs agree with
// each other on every figure, and that they name the Redis version they
// were measured on; the figures themselves are checked against a real
// server by TestMemoryPerKey in limiter/redisabs and limiter/redissup.
func TestMemoryTables(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	type id struct{ strategy, workload string }
	first := map[id]Row{}
	versions := map[string]string{}
	for _, doc := range MemoryDocs {
		rows, version, err := MemoryTables(root, doc)
		if err != nil {
			t.Fatal(err)
		}
		if version == "" {
			t.Errorf("%s does not say which redis-server its figures come from", doc)
		}
		versions[doc] = version
		seen := map[id]bool{}
		for _, r := range rows {
			k := id{r.Strategy, r.Workload}
			if seen[k] {
				t.Errorf("%s:%d: a second row for %s, %q", doc, r.Line, r.Strategy, r.Workload)
			}
			seen[k] = true
			if !known(r.Strategy, r.Workload) {
				t.Errorf("%s:%d: row %s, %q is no workload that TestMemoryPerKey measures", doc, r.Line, r.Strategy, r.Workload)
				continue
			}
			if f, ok := first[k]; ok {
				if f.PerKey != r.PerKey || f.Usage != r.Usage || f.Fields >= 0 && r.Fields >= 0 && f.Fields != r.Fields {
					t.Errorf("%s:%d and %s:%d disagree on %s, %q: %d/%d/%g against %d/%d/%g bytes, bytes, fields",
						f.Doc, f.Line, r.Doc, r.Line, r.Strategy, r.Workload, f.PerKey, f.Usage, f.Fields, r.PerKey, r.Usage, r.Fields)
				}
			} else {
				first[k] = r
			}
		}
		for s, ws := range Workloads {
			for _, w := range ws {
				if !seen[id{s, w}] {
					t.Errorf("%s has no memory-table row for %s, %q", doc, s, w)
				}
			}
		}
	}
	if fmt.Sprint(versions[MemoryDocs[0]]) != versions[MemoryDocs[1]] {
		t.Errorf("the docs name different Redis versions: %v", versions)
	}
}

func known(strategy, workload string) bool {
	for _, w := range Workloads[strategy] {
		if w == workload {
			return true
		}
	}
	return false
}
