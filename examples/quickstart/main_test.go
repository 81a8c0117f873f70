package main

import (
	"math"
	"os"
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
	notAFolder := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(notAFolder, nil, 0o644))
	for _, bad := range []string{"run.jpg", "run", "run.svg.txt", filepath.Join(dir, "missing", "run.svg"), filepath.Join(notAFolder, "run.svg")} {
		*chart = bad
		_, err := options()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "-chart", "the error names the flag")
		assert.Contains(t, err.Error(), bad)
		switch filepath.Dir(bad) {
		case filepath.Join(dir, "missing"):
			assert.Contains(t, err.Error(), "does not exist")
		case notAFolder:
			assert.Contains(t, err.Error(), "is not a folder")
		default:
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
