package key_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-go/sluice/key"
)

func TestValidate(t *testing.T) {
	for _, k := range []string{"a", "user:1", "2001:db8::1", "x@y.z", strings.Repeat("k", key.MaxLen)} {
		if err := key.Validate(k); err != nil {
			t.Errorf("Validate(%.20q) = %v, want nil", k, err)
		}
	}
	for _, k := range []string{"", strings.Repeat("k", key.MaxLen+1)} {
		if err := key.Validate(k); !errors.Is(err, key.ErrInvalid) {
			t.Errorf("Validate(%.20q) = %v, want ErrInvalid", k, err)
		}
	}
}

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"alice", "alice"},
		{"user:1", "user%3A1"},
		{"{tag}", "%7Btag%7D"},
		{"50%", "50%25"},
		{"a b\tc\n", "a%20b%09c%0A"},
		{"2001:db8::1", "2001%3Adb8%3A%3A1"},
		{"*?[]\\", "%2A%3F%5B%5D%5C"},
		{"ünï/✓", "ünï/✓"},
		{"\x00\x7f", "%00%7F"},
	}
	for _, tt := range tests {
		if got := key.Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		back, err := key.Unescape(tt.want)
		if err != nil || back != tt.in {
			t.Errorf("Unescape(%q) = %q, %v; want %q", tt.want, back, err, tt.in)
		}
	}
}

func TestEscapeNoAllocWhenClean(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = key.Escape("user-12345") }); n != 0 {
		t.Errorf("Escape of a clean key allocates %v times, want 0", n)
	}
}

// Regression guard for the collision an unescaped '%' would allow: the key
// "user%3A1" must not share a Redis key with "user:1".
func TestEscapeDistinguishesLiteralEscapes(t *testing.T) {
	a, b := key.Escape("user:1"), key.Escape("user%3A1")
	if a == b {
		t.Fatalf("Escape(user:1) = Escape(user%%3A1) = %q", a)
	}
}

func TestUnescapeRejectsForeignStrings(t *testing.T) {
	for _, s := range []string{"a%", "a%4", "%zz", "%41", "a:b", "a{b", "a b"} {
		if _, err := key.Unescape(s); !errors.Is(err, key.ErrInvalid) {
			t.Errorf("Unescape(%q) error = %v, want ErrInvalid", s, err)
		}
	}
}

func TestName(t *testing.T) {
	got, err := key.Name("sluice", "user:1", key.Absolute, key.Hash)
	if err != nil || got != "sluice:{user%3A1}:abs:h" {
		t.Fatalf("Name = %q, %v", got, err)
	}
	if _, err := key.Name("sluice", "", key.Absolute, key.Hash); !errors.Is(err, key.ErrInvalid) {
		t.Errorf("Name of empty key error = %v, want ErrInvalid", err)
	}
	p, err := key.Parse(got)
	if err != nil || p != (key.Parsed{Prefix: "sluice", Key: "user:1", Strategy: "abs", Suffix: "h"}) {
		t.Errorf("Parse(%q) = %+v, %v", got, p, err)
	}
	if !strings.HasPrefix(got, strings.TrimSuffix(key.Pattern("sluice"), "*")) {
		t.Errorf("Pattern(sluice) = %q does not match %q", key.Pattern("sluice"), got)
	}
	for _, bad := range []string{"plain", "sluice:{x}", "sluice:{x}:abs", ":{x}:abs:h", "sluice:{a%zz}:abs:h"} {
		if _, err := key.Parse(bad); !errors.Is(err, key.ErrInvalid) {
			t.Errorf("Parse(%q) error = %v, want ErrInvalid", bad, err)
		}
	}
}

// FuzzEscape checks that escaping is injective (it round-trips) and that the
// escaped form never holds a byte the schema reserves.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"user:1", "user%3A1", "{a}", "2001:db8::1", "a b", "%", "%25", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := key.Escape(s)
		if strings.ContainsAny(e, ":{}*?[]\\ \t\r\n\x00") {
			t.Fatalf("Escape(%q) = %q keeps a reserved byte", s, e)
		}
		back, err := key.Unescape(e)
		if err != nil || back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", s, back, err)
		}
		if s != "" && len(s) <= key.MaxLen {
			name, err := key.Name("p", s, key.Absolute, key.Hash)
			if err != nil {
				t.Fatalf("Name(%q): %v", s, err)
			}
			p, err := key.Parse(name)
			if err != nil || p.Key != s {
				t.Fatalf("Parse(Name(%q)) = %+v, %v", s, p, err)
			}
		}
	})
}

// FuzzEscapeInjective checks that two different keys never escape alike.
func FuzzEscapeInjective(f *testing.F) {
	f.Add("user:1", "user%3A1")
	f.Add("a b", "a%20b")
	f.Fuzz(func(t *testing.T, a, b string) {
		if a != b && key.Escape(a) == key.Escape(b) {
			t.Fatalf("Escape(%q) = Escape(%q) = %q", a, b, key.Escape(a))
		}
	})
}

func TestLimitName(t *testing.T) {
	got, err := key.LimitName("sluice", "user:1", key.Absolute, "per-day")
	if want := "sluice:{user%3A1}:abs:h:per-day"; err != nil || got != want {
		t.Fatalf("LimitName = %q, %v, want %q", got, err, want)
	}
	p, err := key.Parse(got)
	if want := (key.Parsed{Prefix: "sluice", Key: "user:1", Strategy: "abs", Suffix: "h", Limit: "per-day"}); err != nil || p != want {
		t.Errorf("Parse(%q) = %+v, %v, want %+v", got, p, err, want)
	}
	for _, bad := range []string{"", "Day", "1day", "a*", "a:b", "a b", "_a", strings.Repeat("a", key.MaxLimitName+1)} {
		if _, err := key.LimitName("sluice", "k", key.Absolute, bad); !errors.Is(err, key.ErrInvalidLimitName) {
			t.Errorf("LimitName(%q) error = %v, want ErrInvalidLimitName", bad, err)
		}
	}
	for _, ok := range []string{"a", "per-second", "tier.free_1", strings.Repeat("z", key.MaxLimitName)} {
		if err := key.ValidateLimitName(ok); err != nil {
			t.Errorf("ValidateLimitName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"sluice:{k}:abs:a:day", "sluice:{k}:abs:h:Day", "sluice:{k}:abs:h:", "sluice:{k}:abs:h:d:e"} {
		if _, err := key.Parse(bad); !errors.Is(err, key.ErrInvalid) {
			t.Errorf("Parse(%q) error = %v, want ErrInvalid", bad, err)
		}
	}
}
