package conformance

import (
	"errors"
	"math"

	"github.com/sluice-go/sluice/key"
)

var errKey = key.ErrInvalid

func nan() float64                    { return math.NaN() }
func inf(sign int) float64            { return math.Inf(sign) }
func errorsIs(err, target error) bool { return errors.Is(err, target) }
