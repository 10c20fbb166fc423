package limiter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// parseUnits are the units ParseRate reads ("m", minute or millisecond, is
// refused).
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

// units are the units String writes, smallest first.
var units = [...]struct {
	name string
	d    time.Duration
}{
	{"ms", time.Millisecond},
	{"s", time.Second},
	{"min", time.Minute},
	{"h", time.Hour},
	{"day", 24 * time.Hour},
}

// ParseRate parses a rate written COUNT/PERIOD, as Rate.String writes it:
// "100/s", "1000/min", "5/h", "20000/day", "3/10s" (Every(3, 10*time.Second)),
// "0.5/s". COUNT is an unsigned decimal, with an optional fraction and
// exponent; in plain digits at most 2^53. PERIOD is an optional positive
// multiplier and a unit: "ms"; "s", "sec" or "second"; "min" or "minute";
// "h" or "hour"; "d" or "day" ("m" is ambiguous). No spaces, lower case.
// The result is exactly Every(COUNT, multiplier × unit), and
// ParseRate(r.String()) == r. Anything else (a zero count or multiplier, a
// period past a time.Duration, a rate not finite and > 0) is an error
// wrapping ErrInvalidRate that quotes the input and names the bad part.
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

// parseCount parses COUNT, where strconv.ParseFloat alone would also take
// signs, "Inf", "NaN", hexadecimal and underscores.
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

// maxExactCount is 2^53, above which a float64 skips integers.
const maxExactCount = 1 << 53

// aboveMaxExact reports whether the plain decimal c is above 2^53,
// comparing digits: a float64 rounds 2^53 + 1 down to 2^53.
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

// String writes r as ParseRate reads it, COUNT/PERIOD over r's period:
// the count in its shortest decimal, the period in its largest whole unit
// ("5.5/s", "1000/min", "3/10s", "1/90s"), so ParseRate(r.String()) == r
// for a valid r of whole-millisecond period. Another period is written
// over the unit whose count needs the fewest digits; an invalid rate as
// "NaN/s" or the like, which ParseRate refuses.
func (r Rate) String() string {
	p := r.perSecond
	if math.IsNaN(p) || math.IsInf(p, 0) || p <= 0 {
		// Not a valid rate: no form parses back to it.
		return strconv.FormatFloat(p, 'g', -1, 64) + "/s"
	}
	if d := r.period; d > 0 && d%time.Millisecond == 0 && r.count > 0 {
		return formatCount(r.count) + "/" + formatPeriod(d)
	}
	// Per second, the count is p itself, written in its shortest decimal.
	best, bestUnit := p, "s"
	bestLen := digitLen(strconv.FormatFloat(p, 'e', -1, 64))
	for _, u := range units[2:] {
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

// formatPeriod writes a positive whole-millisecond d as PERIOD in the
// largest unit it is a multiple of: "s", "10s", "90s", "7day", "1500ms".
func formatPeriod(d time.Duration) string {
	for i := len(units) - 1; i >= 0; i-- {
		if u := units[i]; d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String() // not reached: d is a whole number of ms
}

// digitLen returns how many digits the number e (FormatFloat's 'e' format,
// no trailing zeros) has in plain decimal, without the 0 before the point
// of a number below 1: "2.5e+02" is 3, "2.5e+00" 2, "2.5e-02" 3.
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
// with an exponent only above 2^53 or below 10^-6.
func formatCount(n float64) string {
	if n > maxExactCount || n < 1e-6 {
		return strconv.FormatFloat(n, 'g', -1, 64)
	}
	return strconv.FormatFloat(n, 'f', -1, 64)
}
