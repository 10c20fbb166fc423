package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The committed output the plots of docs/benchmarks.md are drawn from, and
// where they are committed.
var (
	inputs = []string{"../testdata/compare-5rounds-quiet.txt", "../testdata/batching-mix-5.txt", "../testdata/latency-3rounds.txt"}
	imgDir = "../../docs/img"
)

// TestPlots draws every chart from the committed benchmark output and
// checks that each is well-formed SVG, that the points are the medians of
// the rows (the figures docs/benchmarks.md gives in its tables), and that
// docs/img holds exactly these files, byte for byte: a changed program or
// changed input must be followed by the command in the page.
func TestPlots(t *testing.T) {
	dir := t.TempDir()
	names, err := run(dir, inputs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"batching-10k-ops.svg", "batching-hot-ops.svg",
		"compare-10k-latency.svg", "compare-10k-ops.svg",
		"compare-hot-latency.svg", "compare-hot-ops.svg",
		"latency-10k-g1.svg", "latency-10k-g64.svg", "latency-10k-g8.svg",
		"memory.svg",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("wrote %v, want %v", names, want)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(b))
		elems := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s is not well-formed XML: %v", n, err)
			}
			if _, ok := tok.(xml.StartElement); ok {
				elems++
			}
		}
		if elems < 20 || !strings.HasPrefix(string(b), "<svg ") {
			t.Errorf("%s: %d elements, want an <svg> with axes, points and a legend", n, elems)
		}
		committed, err := os.ReadFile(filepath.Join(imgDir, n))
		if err != nil {
			t.Errorf("docs/img/%s: %v (regenerate: cd bench && go run ./plots -o ../docs/img %s)", n, err, strings.Join(trimDots(inputs), " "))
		} else if !bytes.Equal(committed, b) {
			t.Errorf("docs/img/%s differs from what the program draws (regenerate: cd bench && go run ./plots -o ../docs/img %s)", n, strings.Join(trimDots(inputs), " "))
		}
	}
	entries, err := os.ReadDir(imgDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".svg") && !contains(names, e.Name()) {
			t.Errorf("docs/img/%s is not drawn by the program", e.Name())
		}
	}

	// Points are medians of the rows: the figures of the page's tables.
	for file, point := range map[string]string{
		"compare-10k-ops.svg":  "<title>redisabs, 64: 36633.0</title>",
		"compare-hot-ops.svg":  "<title>redis_rate, 64: 38834.0</title>",
		"memory.svg":           "<title>redisabs, 5: 266.2</title>",
		"batching-10k-ops.svg": "<title>redisabs, 256: 119464.0</title>",
		"latency-10k-g8.svg":   "<title>redis_rate, p50: 313.7</title>",
	} {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		if !strings.Contains(string(b), point) {
			t.Errorf("%s has no point %s", file, point)
		}
	}
}

func trimDots(p []string) []string {
	out := make([]string, len(p))
	for i, s := range p {
		out[i] = strings.TrimPrefix(s, "../")
	}
	return out
}

func TestParse(t *testing.T) {
	in := "goos: linux\n" +
		"BenchmarkInc/load=hot/g=8/impl=redisabs-2\t 43975\t 30792 ns/op\t 32476 ops/s\t 616 B/op\n" +
		"BenchmarkMemory/buckets=5/impl=redis_rate-2\t1\t154.2 bytes/key\n" +
		"| a table line |\n"
	s, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 {
		t.Fatalf("parsed %d samples, want 2", len(s))
	}
	if s[0].bench != "BenchmarkInc" || s[0].params["impl"] != "redisabs" || s[0].params["g"] != "8" || s[0].metrics["ops/s"] != 32476 || s[0].metrics["ns/op"] != 30792 {
		t.Errorf("first sample %+v", s[0])
	}
	if s[1].params["buckets"] != "5" || s[1].metrics["bytes/key"] != 154.2 {
		t.Errorf("second sample %+v", s[1])
	}
	if _, err := parse(strings.NewReader("BenchmarkX-2\t1\tfast ns/op\n")); err == nil {
		t.Error("a metric that is not a number parsed without error")
	}
}
