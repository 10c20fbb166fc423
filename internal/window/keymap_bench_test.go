package window

import (
	"strconv"
	"testing"
)

var benchKeys = func() []string {
	k := make([]string, 10_000)
	for i := range k {
		k[i] = "user-" + strconv.Itoa(i)
	}
	return k
}()

// BenchmarkKeymapFill stores 10,000 new keys in an empty key map (the
// entries made beforehand): the table's share of a key's first touch,
// growth and rehashes included. ns/op is per key.
func BenchmarkKeymapFill(b *testing.B) {
	es := make([]entry, len(benchKeys))
	b.ReportAllocs()
	for i := 0; i < b.N; i += len(benchKeys) {
		m := newKeymap()
		for j, k := range benchKeys {
			m.loadOrStore(m.hash(k), k, &es[j])
		}
	}
}

// BenchmarkKeymapLoad looks up 10,000 known keys round-robin.
func BenchmarkKeymapLoad(b *testing.B) {
	m := newKeymap()
	es := make([]entry, len(benchKeys))
	for j, k := range benchKeys {
		m.loadOrStore(m.hash(k), k, &es[j])
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := benchKeys[i%len(benchKeys)]
		if m.load(m.hash(k), k) == nil {
			b.Fatal("lost")
		}
	}
}
