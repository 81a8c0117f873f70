package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheChartFlagTakesAnSVGOrPNGFile(t *testing.T) {
	saved := *chart
	t.Cleanup(func() { *chart = saved })
	for _, ok := range []string{"", "run.svg", "out/run.PNG"} {
		*chart = ok
		opts, err := options()
		require.NoError(t, err, ok)
		assert.Equal(t, ok, opts.Chart)
	}
	for _, bad := range []string{"run.jpg", "run", "run.svg.txt"} {
		*chart = bad
		_, err := options()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "-chart", "the error names the flag")
		assert.Contains(t, err.Error(), bad)
		assert.Contains(t, err.Error(), ".svg or .png")
	}
}
