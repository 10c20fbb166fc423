// Command seq writes EVALSHA calls as RESP commands to standard output, for
// feeding a redis-server through `redis-cli --pipe` in an order that fixes
// which path every call takes: with -mode join every round runs at one
// instant, so after the first round each call joins its key's newest bucket;
// with -mode open the rounds are 700 ms apart, so every call opens a bucket;
// with -mode steady the rounds are -step ms apart (300 with the default
// window: two calls per 600 ms bucket), the steady state of a key that is
// called every -step ms: once its window is full, every other call finds
// its oldest bucket dead.
// The instant reaches the script through the NOW token of -args (the
// scripts' clock argument), so nothing depends on how fast the server runs.
//
//	go run ./floor/seq -sha SHA -mode join -keys 2000 -rounds 4 \
//		-key 'sluice:{user:%d}:abs:h' -args 'NOW 60000 600 1000 1 60600'
//
// floor/instr.sh uses it; -first and -last select the rounds to print, so
// the first round (which creates the keys) can be sent apart. -key may
// name several keys, separated by spaces, for a script over a set of
// hashes (abs_set.lua, sup_set.lua): each call then passes all of them.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	sha := flag.String("sha", "", "the script's SHA1 (SCRIPT LOAD)")
	mode := flag.String("mode", "join", "join: all rounds at one instant; open: rounds 700 ms apart; steady: rounds -step ms apart")
	step := flag.Int64("step", 300, "with -mode steady: ms between rounds")
	keys := flag.Int("keys", 2000, "keys per round")
	first := flag.Int("first", 1, "first round to print")
	last := flag.Int("last", 4, "last round to print")
	keyFmt := flag.String("key", "k:%d", "the key, with %d for its number; several space-separated keys (a set's hashes) are passed as KEYS[1..]")
	args := flag.String("args", "", "ARGV, space-separated; NOW is replaced by the round's instant in ms, EMPTY by an empty string (the scripts then read Redis TIME)")
	flag.Parse()
	if *sha == "" || (*mode != "join" && *mode != "open" && *mode != "steady") {
		flag.Usage()
		os.Exit(2)
	}
	fmts := strings.Fields(*keyFmt)
	const t0 = 1732270000000
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for r := 1; r <= *last; r++ {
		now := int64(t0)
		switch *mode {
		case "open":
			now += int64(r-1) * 700
		case "steady":
			now += int64(r-1) * *step
		}
		argv := strings.Fields(strings.ReplaceAll(*args, "NOW", strconv.FormatInt(now, 10)))
		for i, a := range argv {
			if a == "EMPTY" { // an empty argument: the scripts read Redis TIME
				argv[i] = ""
			}
		}
		if r < *first {
			continue
		}
		for k := 0; k < *keys; k++ {
			parts := []string{"EVALSHA", *sha, strconv.Itoa(len(fmts))}
			for _, f := range fmts {
				parts = append(parts, fmt.Sprintf(f, k))
			}
			parts = append(parts, argv...)
			fmt.Fprintf(w, "*%d\r\n", len(parts))
			for _, p := range parts {
				fmt.Fprintf(w, "$%d\r\n%s\r\n", len(p), p)
			}
		}
	}
}
