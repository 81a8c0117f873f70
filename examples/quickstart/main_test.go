package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheChartFlagTakesAnSVGOrPNGFile(t *testing.T) {
	saved := *chart
	t.Cleanup(func() { *chart = saved })
	dir := t.TempDir()
	for _, ok := range []string{"", "run.svg", filepath.Join(dir, "run.PNG")} {
		*chart = ok
		opts, err := options()
		require.NoError(t, err, ok)
		assert.Equal(t, ok, opts.Chart)
	}
	for _, bad := range []string{"run.jpg", "run", "run.svg.txt", filepath.Join(dir, "missing", "run.svg")} {
		*chart = bad
		_, err := options()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "-chart", "the error names the flag")
		assert.Contains(t, err.Error(), bad)
		if filepath.Dir(bad) == dir+"/missing" {
			assert.Contains(t, err.Error(), "does not exist")
		} else {
			assert.Contains(t, err.Error(), ".svg or .png")
		}
	}
}

func TestTheRateFlagIsWithinTheCloudTasksBounds(t *testing.T) {
	saved := *rate
	t.Cleanup(func() { *rate = saved })
	for _, bad := range []float64{0, -1, 500.5, 1e9, math.NaN(), math.Inf(1)} {
		*rate = bad
		_, err := options()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "-rate", "the error names the flag")
	}
	for _, ok := range []float64{0.5, 500} {
		*rate = ok
		_, err := options()
		assert.NoError(t, err, ok)
	}
}
