package progress

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counter is a Sample source the test moves forward.
type counter struct {
	mu sync.Mutex
	c  Counts
}

func (f *counter) set(c Counts) { f.mu.Lock(); f.c = c; f.mu.Unlock() }
func (f *counter) get() Counts  { f.mu.Lock(); defer f.mu.Unlock(); return f.c }

func TestPlainLinesAppearOncePerIntervalWithTheDeliveryRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		src := &counter{}
		r := &Reporter{Out: &out, Total: 1000, Sample: src.get}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()

		// Every second 200 more requests are delivered, half-way between ticks; creation
		// finished at once.
		time.Sleep(500 * time.Millisecond)
		for i := 1; i <= 3; i++ {
			src.set(Counts{Created: 1000, Delivered: 200 * i})
			time.Sleep(time.Second)
		}
		cancel()
		<-done

		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		require.Len(t, lines, 4, "three ticks and the final line:\n%s", out.String())
		assert.Equal(t, "   1.0s  created 1000/1000  delivered 200/1000  delivering at 200/s", lines[0])
		assert.Equal(t, "   2.0s  created 1000/1000  delivered 400/1000  delivering at 200/s", lines[1])
		assert.Equal(t, "   3.0s  created 1000/1000  delivered 600/1000  delivering at 200/s", lines[2])
		assert.Equal(t, "   3.5s  created 1000/1000  delivered 600/1000  delivering at 133/s", lines[3],
			"the final line, drawn at cancel, measures the rate since the oldest sample of the last second")
		assert.NotContains(t, out.String(), "\r", "plain mode never redraws")
	})
}

func TestBarRedrawsOneLineAndEndsItWhenDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		src := &counter{}
		src.set(Counts{Created: 50, Delivered: 25})
		r := &Reporter{Out: &out, Total: 100, Bar: true, Width: 80, Sample: src.get}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		time.Sleep(250 * time.Millisecond) // two redraws at the 100ms default
		cancel()
		<-done

		frames := strings.Split(out.String(), "\r")[1:]
		require.Len(t, frames, 3, "two redraws and the final one")
		for i, f := range frames {
			line := strings.TrimSuffix(strings.TrimSuffix(f, "\n"), "\x1b[K")
			line = strings.Replace(line, "\x1b[K", "", 1)
			assert.LessOrEqual(t, len(line), 80, "frame %d fits the width: %q", i, line)
			assert.Contains(t, line, " 50/100  delivered [")
			assert.Contains(t, line, " 25/100")
		}
		assert.True(t, strings.HasSuffix(out.String(), "\n"), "the final frame ends the line")
		assert.Equal(t, 1, strings.Count(out.String(), "\n"))
	})
}

func TestBarFillsInProportion(t *testing.T) {
	assert.Equal(t, "#####-----", bar(50, 100, 10))
	assert.Equal(t, "----------", bar(0, 100, 10))
	assert.Equal(t, "##########", bar(100, 100, 10))
	assert.Equal(t, "##########", bar(120, 100, 10), "more than the total stays full")
	assert.Equal(t, "##########", bar(0, 0, 10), "an empty run is complete")
}
