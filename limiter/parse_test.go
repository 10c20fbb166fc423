package limiter_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want limiter.Rate
		str  string // canonical form
	}{
		{"100/s", limiter.PerSecond(100), "100/s"},
		{"1000/min", limiter.PerMinute(1000), "1000/min"},
		{"5/h", limiter.PerHour(5), "5/h"},
		{"20000/day", limiter.PerDay(20000), "20000/day"},
		{"3/10s", limiter.Every(3, 10*time.Second), "3/10s"},
		{"5/2h", limiter.Every(5, 2*time.Hour), "5/2h"},
		{"0.5/s", limiter.PerSecond(0.5), "0.5/s"},
		{"5.5/s", limiter.PerSecond(5.5), "5.5/s"},
		{"1/ms", limiter.Every(1, time.Millisecond), "1/ms"},
		{"1/3ms", limiter.Every(1, 3*time.Millisecond), "1/3ms"},
		{"7/1500ms", limiter.Every(7, 1500*time.Millisecond), "7/1500ms"},
		{"100/sec", limiter.PerSecond(100), "100/s"},
		{"100/second", limiter.PerSecond(100), "100/s"},
		{"60/minute", limiter.PerMinute(60), "60/min"},
		{"1/minute", limiter.PerMinute(1), "1/min"},
		{"60/h", limiter.PerHour(60), "60/h"},
		{"90/hour", limiter.PerHour(90), "90/h"},
		{"1.5/min", limiter.PerMinute(1.5), "1.5/min"},
		{"24/d", limiter.PerDay(24), "24/day"},
		{"1.5/day", limiter.PerDay(1.5), "1.5/day"},
		{"1/7day", limiter.Every(1, 7*24*time.Hour), "1/7day"},
		{"100/min", limiter.PerMinute(100), "100/min"},
		{"1e3/min", limiter.PerMinute(1000), "1000/min"},
		{"2.5E+2/s", limiter.PerSecond(250), "250/s"},
		{"1e6/s", limiter.PerSecond(1e6), "1000000/s"},
		{"1e21/s", limiter.PerSecond(1e21), "1e+21/s"},
		{"1e-7/s", limiter.PerSecond(1e-7), "1e-07/s"},
		{"3/010s", limiter.Every(3, 10*time.Second), "3/10s"},
		{"0100/s", limiter.PerSecond(100), "100/s"},
		{"1/106751day", limiter.Every(1, 106751*24*time.Hour), "1/106751day"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := limiter.ParseRate(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("ParseRate(%q) = %v (%v/s), %v; want %v (%v/s)", tt.in, got, got.PerSecondValue(), err, tt.want, tt.want.PerSecondValue())
			}
			if tt.str == "1/106751day" { // not a form String writes
				return
			}
			if s := got.String(); s != tt.str {
				t.Errorf("ParseRate(%q).String() = %q, want %q", tt.in, s, tt.str)
			}
			if back, err := limiter.ParseRate(got.String()); err != nil || back != got {
				t.Errorf("ParseRate(%q) = %v, %v; want %v", got.String(), back, err, got)
			}
		})
	}
}

func TestParseRateErrors(t *testing.T) {
	tests := []struct {
		in   string
		part string // the error names it, quoted
	}{
		{"", `want COUNT/PERIOD`},
		{"100", `parse "100": want COUNT/PERIOD`},
		{"100/", `missing period`},
		{"/s", `missing count`},
		{"0/s", `count "0" is zero`},
		{"0.0/s", `count "0.0" is zero`},
		{"-5/s", `count "-5"`},
		{"+5/s", `count "+5"`},
		{"NaN/s", `count "NaN"`},
		{"Inf/s", `count "Inf"`},
		{"inf/s", `count "inf"`},
		{"0x10/s", `count "0x10"`},
		{"1_000/s", `count "1_000"`},
		{".5/s", `count ".5"`},
		{"5./s", `count "5."`},
		{"1e/s", `count "1e"`},
		{"1e+/s", `count "1e+"`},
		{" 5/s", `count " 5"`},
		{"5 /s", `count "5 "`},
		{"5/ s", `unknown unit " s"`},
		{"5/s ", `unknown unit "s "`},
		{"1e999/s", `count "1e999" is out of range`},
		{"5/m", `ambiguous unit "m"`},
		{"5/S", `unknown unit "S"`},
		{"5/Min", `unknown unit "Min"`},
		{"5/us", `unknown unit "us"`},
		{"5/10", `period "10" has no unit`},
		{"5/0s", `multiplier "0" is zero`},
		{"5/-1s", `unknown unit "-1s"`},
		{"5/1.5h", `unknown unit ".5h"`},
		{"5/106752day", `period "106752day" is too long`},
		{"5/99999999999999999999s", `period "99999999999999999999s" is too long`},
		{"1/2/s", `unknown unit "/s"`},
		{"1e308/ms", `+Inf events per second`},
		{"1e-320/day", `0 events per second`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := limiter.ParseRate(tt.in)
			if !errors.Is(err, limiter.ErrInvalidRate) {
				t.Fatalf("ParseRate(%q) = %v, %v; want ErrInvalidRate", tt.in, got, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.part) || !strings.Contains(msg, `parse "`) {
				t.Errorf("ParseRate(%q) error = %q, want it to quote the input and name %s", tt.in, msg, tt.part)
			}
			if got != (limiter.Rate{}) {
				t.Errorf("ParseRate(%q) = %v with an error, want the zero Rate", tt.in, got)
			}
		})
	}
}

func TestRateStringForms(t *testing.T) {
	tests := []struct {
		r    limiter.Rate
		want string
	}{
		{limiter.PerSecond(5.5), "5.5/s"},
		{limiter.PerSecond(1), "1/s"},
		{limiter.PerSecond(0.1), "0.1/s"},
		{limiter.PerSecond(0.25), "0.25/s"},
		{limiter.PerSecond(1234), "1234/s"},
		{limiter.PerSecond(200), "200/s"},
		{limiter.PerMinute(60), "60/min"},
		{limiter.PerMinute(7), "7/min"},
		{limiter.PerMinute(1_000), "1000/min"},
		{limiter.PerHour(3600), "3600/h"},
		{limiter.PerHour(100), "100/h"},
		{limiter.PerDay(1), "1/day"},
		{limiter.PerDay(86400 * 2), "172800/day"},
		{limiter.Every(1, 1500*time.Millisecond), "1/1500ms"},
		{limiter.Every(1, 90*time.Second), "1/90s"},
		{limiter.Every(3, 2*24*time.Hour), "3/2day"},
		// A period that is not whole ms: over the unit of fewest digits.
		{limiter.Every(1, 1500*time.Microsecond), "40000/min"},
		{limiter.Every(1, 7*time.Millisecond), "1/7ms"},
		{limiter.PerSecond(math.MaxFloat64), "1.7976931348623157e+308/s"},
		{limiter.PerSecond(math.SmallestNonzeroFloat64), "5e-324/s"},
		// Invalid rates: per second, refused by ParseRate.
		{limiter.Rate{}, "0/s"},
		{limiter.PerSecond(-5), "-5/s"},
		{limiter.PerSecond(math.NaN()), "NaN/s"},
		{limiter.PerSecond(math.Inf(1)), "+Inf/s"},
		{limiter.Every(1, 0), "NaN/s"},
	}
	for _, tt := range tests {
		got := tt.r.String()
		if got != tt.want {
			t.Errorf("Rate(%v/s).String() = %q, want %q", tt.r.PerSecondValue(), got, tt.want)
		}
		back, err := limiter.ParseRate(got)
		// A period of whole ms comes back equal; another, as the same
		// events per second.
		same := back.PerSecondValue() == tt.r.PerSecondValue() && (limiter.Period(tt.r)%time.Millisecond != 0 || back == tt.r)
		if valid := limiter.ValidateRate(tt.r) == nil; valid && (err != nil || !same) {
			t.Errorf("ParseRate(%q) = %v, %v; want %v/s", got, back.PerSecondValue(), err, tt.r.PerSecondValue())
		} else if !valid && !errors.Is(err, limiter.ErrInvalidRate) {
			t.Errorf("ParseRate(%q) = %v, %v; want ErrInvalidRate", got, back, err)
		}
	}
}

// TestRateStringRoundTrip checks the round trip on every rate the usual
// constructors build from small counts.
func TestRateStringRoundTrip(t *testing.T) {
	ctors := map[string]func(float64) limiter.Rate{
		"PerSecond": limiter.PerSecond,
		"PerMinute": limiter.PerMinute,
		"PerHour":   limiter.PerHour,
		"PerDay":    limiter.PerDay,
		"Every7ms":  func(n float64) limiter.Rate { return limiter.Every(n, 7*time.Millisecond) },
		"Every13s":  func(n float64) limiter.Rate { return limiter.Every(n, 13*time.Second) },
	}
	for name, ctor := range ctors {
		for i := 1; i <= 5000; i++ {
			for _, n := range []float64{float64(i), float64(i) / 10, float64(i) / 1000} {
				r := ctor(n)
				s := r.String()
				if back, err := limiter.ParseRate(s); err != nil || back != r {
					t.Fatalf("%s(%v).String() = %q; ParseRate = %v/s, %v; want %v/s", name, n, s, back.PerSecondValue(), err, r.PerSecondValue())
				}
			}
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{
		"100/s", "1000/min", "5/h", "20000/day", "3/10s", "5/2h", "0.5/s",
		"1/3ms", "1e21/s", "5e-324/s", "1.7976931348623157e+308/s", "5/m",
		"1e308/ms", "5/106751day", "0/s", "1/2/s", "", "/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := limiter.ParseRate(s)
		if err != nil {
			if !errors.Is(err, limiter.ErrInvalidRate) {
				t.Fatalf("ParseRate(%q) error = %v, want ErrInvalidRate", s, err)
			}
			return
		}
		if err := limiter.ValidateRate(r); err != nil {
			t.Fatalf("ParseRate(%q) = %v, which does not validate: %v", s, r, err)
		}
		str := r.String()
		back, err := limiter.ParseRate(str)
		if err != nil || back != r {
			t.Fatalf("ParseRate(%q) = %v/s; String = %q; ParseRate(%q) = %v/s, %v", s, r.PerSecondValue(), str, str, back.PerSecondValue(), err)
		}
		if again := back.String(); again != str {
			t.Fatalf("String not canonical: %q, then %q", str, again)
		}
	})
}

// FuzzRateString checks that every valid rate, however it was built,
// round-trips through String.
func FuzzRateString(f *testing.F) {
	for _, p := range []float64{1, 5.5, 1.0 / 60, 1000.0 / 60, 20000.0 / 86400, 0.3, 1e21, 1e-7, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p float64) {
		r := limiter.PerSecond(p)
		s := r.String()
		back, err := limiter.ParseRate(s)
		if limiter.ValidateRate(r) != nil {
			if err == nil {
				t.Fatalf("ParseRate(%q) = %v for invalid rate %v/s, want an error", s, back, p)
			}
			return
		}
		if err != nil || back != r {
			t.Fatalf("PerSecond(%v).String() = %q; ParseRate = %v/s, %v", p, s, back.PerSecondValue(), err)
		}
	})
}

// TestParseRateExactCounts: a count in plain digits above 2^53 is refused
// (a float64 would round 2^53 + 1 to 2^53 without a word); at 2^53 and
// below, with a fraction, or with an exponent, it parses, and String
// writes counts above 2^53 with an exponent so they parse back.
func TestParseRateExactCounts(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want limiter.Rate
	}{
		{"9007199254740991/s", limiter.PerSecond(9007199254740991)},
		{"9007199254740992/s", limiter.PerSecond(1 << 53)},
		{"09007199254740992/s", limiter.PerSecond(1 << 53)},
		{"9007199254740992.0/s", limiter.PerSecond(1 << 53)},
		{"9007199254740991.5/s", limiter.PerSecond(9007199254740991.5)},
		{"1e16/s", limiter.PerSecond(1e16)},
		{"9.007199254740993e15/s", limiter.PerSecond(9.007199254740993e15)},
		{"0.1/s", limiter.PerSecond(0.1)},
		{"3/10s", limiter.Every(3, 10*time.Second)},
	} {
		got, err := limiter.ParseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{
		"9007199254740993/s",
		"9007199254740992.5/s",
		"9007199254740992.000001/s",
		"00009007199254740993/s",
		"18014398509481984/s", // 2^54, a float64 itself, still refused in plain digits
		"99999999999999999999/min",
	} {
		count, _, _ := strings.Cut(in, "/")
		got, err := limiter.ParseRate(in)
		if !errors.Is(err, limiter.ErrInvalidRate) || !strings.Contains(err.Error(), `count "`+count+`" is above 2^53`) {
			t.Errorf("ParseRate(%q) = %v, %v; want ErrInvalidRate naming the count %q", in, got, err, count)
		}
	}
	for _, tt := range []struct {
		r    limiter.Rate
		want string
	}{
		{limiter.PerSecond(1 << 53), "9007199254740992/s"},
		{limiter.PerSecond(1 << 54), "1.8014398509481984e+16/s"},
		{limiter.PerSecond(1e20), "1e+20/s"},
	} {
		s := tt.r.String()
		if s != tt.want {
			t.Errorf("PerSecond(%v).String() = %q, want %q", tt.r.PerSecondValue(), s, tt.want)
		}
		if back, err := limiter.ParseRate(s); err != nil || back != tt.r {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", s, back, err, tt.r)
		}
	}
}
