package hybrid_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
