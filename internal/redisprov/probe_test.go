package redisprov

import "testing"

// The probe keys, the single client's and a cluster master's, are the
// cleaner's to recognise (ParseProbe); nothing else with the probe's part
// is.
func TestParseProbe(t *testing.T) {
	for _, c := range []struct {
		key, strategy string
		ok            bool
	}{
		{ProbeKey("p", "abs"), "abs", true},
		{ProbeKey("p", "sup"), "sup", true},
		{NodeProbeKey("p", "%probe-12", "abs"), "abs", true},
		{"p:{%probe-}:abs:h", "", false},
		{"p:{%probe-1x}:abs:h", "", false},
		{"p:{%probex}:abs:h", "", false},
		{"q:{%probe}:abs:h", "", false},
		{"p:{%probe}:abs:h:x", "", false},
		{"p:{%probe}:zzz:h", "", false},
	} {
		s, ok := ParseProbe(c.key, "p")
		if ok != c.ok || (ok && s != c.strategy) {
			t.Errorf("ParseProbe(%q) = %q, %v; want %q, %v", c.key, s, ok, c.strategy, c.ok)
		}
	}
}
