package limiter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// rateUnit is one unit ParseRate accepts.
type rateUnit struct {
	name string
	d    time.Duration
}

// parseUnits maps every accepted unit name to its length. "m" is absent on
// purpose: it could mean minute or millisecond.
var parseUnits = map[string]time.Duration{
	"ms":     time.Millisecond,
	"s":      time.Second,
	"sec":    time.Second,
	"second": time.Second,
	"min":    time.Minute,
	"minute": time.Minute,
	"h":      time.Hour,
	"hour":   time.Hour,
	"d":      24 * time.Hour,
	"day":    24 * time.Hour,
}

// stringUnits are the units String writes, smallest first (ties go to the
// first).
var stringUnits = [...]rateUnit{
	{"s", time.Second},
	{"min", time.Minute},
	{"h", time.Hour},
	{"day", 24 * time.Hour},
}

// ParseRate parses a rate written as COUNT/PERIOD, the form Rate.String
// writes:
//
//	"100/s"      100 events per second     PerSecond(100)
//	"1000/min"   1000 events per minute    PerMinute(1000)
//	"5/h"        5 events per hour         PerHour(5)
//	"20000/day"  20000 events per day      PerDay(20000)
//	"3/10s"      3 events per 10 seconds   Every(3, 10*time.Second)
//	"0.5/s"      one event every 2 seconds PerSecond(0.5)
//
// COUNT is an unsigned decimal number, optionally with a fraction and an
// exponent ("1.5", "2e3"). A count in plain digits is at most 2^53, above
// which a float64 no longer holds every integer; a count with an exponent
// or a fraction reads as the nearest float64. PERIOD is an optional positive integer
// multiplier followed by a unit: "ms"; "s", "sec" or "second"; "min" or
// "minute"; "h" or "hour"; "d" or "day". "m" is refused as ambiguous
// (minute or millisecond). Units are lower case, and no spaces are allowed
// anywhere. The result is exactly Every(COUNT, multiplier × unit), so
// ParseRate("1000/min") == PerMinute(1000).
//
// An input that does not parse, a count or multiplier of zero, a period
// longer than a time.Duration can hold (about 292 years), or a rate that is
// not a finite number > 0 events per second (such as "1e308/ms") is an
// error wrapping ErrInvalidRate that quotes the input and names the bad
// part. The rate's period is the PERIOD read (10 s for "3/10s"), and
// ParseRate(r.String()) == r for every r that ParseRate returns.
func ParseRate(s string) (Rate, error) {
	count, period, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, fmt.Errorf(`%w: parse %q: want COUNT/PERIOD, such as "100/s" or "3/10s"`, ErrInvalidRate, s)
	}
	n, err := parseCount(count)
	if err != nil {
		return Rate{}, fmt.Errorf("%w: parse %q: %v", ErrInvalidRate, s, err)
	}
	d, err := parsePeriod(period)
	if err != nil {
		return Rate{}, fmt.Errorf("%w: parse %q: %v", ErrInvalidRate, s, err)
	}
	r := Every(n, d)
	if p := r.perSecond; math.IsInf(p, 0) || math.IsNaN(p) || p <= 0 {
		return Rate{}, fmt.Errorf("%w: parse %q: %v events per second (want a finite number > 0)", ErrInvalidRate, s, p)
	}
	return r, nil
}

// parseCount parses COUNT: digits, an optional fraction, an optional
// exponent. strconv.ParseFloat alone would also take signs, "Inf", "NaN",
// hexadecimal and underscores.
func parseCount(c string) (float64, error) {
	i := digits(c, 0)
	ok := i > 0
	if ok && i < len(c) && c[i] == '.' {
		j := digits(c, i+1)
		ok = j > i+1
		i = j
	}
	plain := i // the end of the count's plain decimal part
	if ok && i < len(c) && (c[i] == 'e' || c[i] == 'E') {
		i++
		if i < len(c) && (c[i] == '+' || c[i] == '-') {
			i++
		}
		j := digits(c, i)
		ok = j > i
		i = j
	}
	if c == "" {
		return 0, fmt.Errorf(`missing count before "/"`)
	}
	if !ok || i != len(c) {
		return 0, fmt.Errorf("count %q is not an unsigned decimal number", c)
	}
	n, err := strconv.ParseFloat(c, 64)
	switch {
	case err != nil || math.IsInf(n, 0):
		return 0, fmt.Errorf("count %q is out of range", c)
	case n == 0:
		return 0, fmt.Errorf("count %q is zero", c)
	case plain == len(c) && n >= maxExactCount && aboveMaxExact(c):
		return 0, fmt.Errorf("count %q is above 2^53 (%d), where a float64 no longer holds every integer; write it with an exponent to accept the nearest float64", c, maxExactCount)
	}
	return n, nil
}

// maxExactCount is 2^53: a float64 holds every integer up to it, and not
// every one above.
const maxExactCount = 1 << 53

// aboveMaxExact reports whether the plain decimal c (digits, an optional
// fraction) is above 2^53, comparing digits, not floats: a float64 rounds
// 2^53 + 1 down to 2^53.
func aboveMaxExact(c string) bool {
	whole, frac, _ := strings.Cut(c, ".")
	whole = strings.TrimLeft(whole, "0")
	const limit = "9007199254740992"
	if len(whole) != len(limit) {
		return len(whole) > len(limit)
	}
	if whole != limit {
		return whole > limit
	}
	return strings.Trim(frac, "0") != ""
}

// parsePeriod parses PERIOD: an optional integer multiplier and a unit.
func parsePeriod(p string) (time.Duration, error) {
	i := digits(p, 0)
	mul, name := p[:i], p[i:]
	unit, ok := parseUnits[name]
	switch {
	case ok:
	case name == "" && p == "":
		return 0, fmt.Errorf(`missing period after "/"`)
	case name == "":
		return 0, fmt.Errorf("period %q has no unit (want ms, s, min, h or d)", p)
	case name == "m":
		return 0, fmt.Errorf(`ambiguous unit "m" (want "min" or "ms")`)
	default:
		return 0, fmt.Errorf("unknown unit %q (want ms, s, min, h or d)", name)
	}
	if mul == "" {
		return unit, nil
	}
	m, err := strconv.ParseInt(mul, 10, 64)
	switch {
	case err != nil || m > math.MaxInt64/int64(unit):
		return 0, fmt.Errorf("period %q is too long", p)
	case m == 0:
		return 0, fmt.Errorf("multiplier %q is zero", mul)
	}
	return time.Duration(m) * unit, nil
}

// digits returns the index of the first non-digit of s at or after i.
func digits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// format writes r in the canonical form String documents.
func (r Rate) format() string {
	p := r.perSecond
	if math.IsNaN(p) || math.IsInf(p, 0) || p <= 0 {
		// Not a valid rate: no form parses back to it.
		return strconv.FormatFloat(p, 'g', -1, 64) + "/s"
	}
	if d := r.period; d > 0 && d%time.Millisecond == 0 && r.count > 0 {
		return formatCount(r.count) + "/" + formatPeriod(d)
	}
	// Per second, the count is p itself, written in its shortest decimal.
	best, bestUnit := p, stringUnits[0].name
	bestLen := digitLen(strconv.FormatFloat(p, 'e', -1, 64))
	for _, u := range stringUnits[1:] {
		x := p * u.d.Seconds()
		if math.IsInf(x, 0) {
			break
		}
		// The fewest significant digits whose value over this unit is p.
		// A count of prec significant digits is at least prec digits long,
		// so only prec < bestLen can win (a tie goes to the smaller unit).
		for prec := 1; prec < bestLen; prec++ {
			e := strconv.FormatFloat(x, 'e', prec-1, 64)
			n, err := strconv.ParseFloat(e, 64)
			if err != nil || n <= 0 || Every(n, u.d).perSecond != p {
				continue
			}
			if l := digitLen(e); l < bestLen {
				best, bestUnit, bestLen = n, u.name, l
			}
			break
		}
	}
	return formatCount(best) + "/" + bestUnit
}

// periodUnits are the units formatPeriod writes, largest first.
var periodUnits = [...]rateUnit{
	{"day", 24 * time.Hour},
	{"h", time.Hour},
	{"min", time.Minute},
	{"s", time.Second},
	{"ms", time.Millisecond},
}

// formatPeriod writes a positive whole-millisecond d as PERIOD in the
// largest unit it is a whole multiple of, without a multiplier of 1: "s",
// "10s", "90s", "2h", "7day", "1500ms".
func formatPeriod(d time.Duration) string {
	for _, u := range periodUnits {
		if d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String() // not reached: d is a whole number of ms
}

// digitLen returns how many digits the number e, written by FormatFloat in
// the 'e' format without trailing zeros in its mantissa, has in plain
// decimal notation, not counting the 0 before the point of a number below
// 1: "2.5e+02" (250) is 3, "2.5e+00" is 2, "2.5e-02" (0.025) is 3.
func digitLen(e string) int {
	i := strings.IndexByte(e, 'e')
	k := i // significant digits
	if i > 1 {
		k-- // the decimal point
	}
	exp, _ := strconv.Atoi(e[i+1:])
	// Digits from the highest place, 10^max(exp, 0), down to the lowest,
	// 10^min(exp-k+1, 0).
	n := max(exp, 0) - min(exp-k+1, 0) + 1
	if exp < 0 {
		n-- // the 0 before the point
	}
	return n
}

// formatCount writes n as the shortest decimal that parses back to it,
// without an exponent unless n is above 2^53 (which ParseRate refuses in
// plain digits) or below 10^-6.
func formatCount(n float64) string {
	if n > maxExactCount || n < 1e-6 {
		return strconv.FormatFloat(n, 'g', -1, 64)
	}
	return strconv.FormatFloat(n, 'f', -1, 64)
}
