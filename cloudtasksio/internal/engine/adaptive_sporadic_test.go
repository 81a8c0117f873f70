package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Refusals that do not follow the rate (package adaptive, spell.go), through the engine: a steady share
// of creates refused at random, and a burst.

// sporadicRun is one engine writing to testQueue for a span of fake time against a fake that
// refuses creates at random, with adaptive concurrency on or off.
type sporadicRun struct {
	created, rejected int
	perSecond         float64
	decreases         int
	err               error
}

func runSporadic(t *testing.T, f *throttlingFake, adaptive bool, span time.Duration) (r sporadicRun) {
	synctest.Test(t, func(t *testing.T) {
		var a *Adaptive
		if adaptive {
			a = NewAdaptive()
		}
		f.init()
		e := New[string](f, adaptiveOptions(a), nil)
		start := time.Now()
		ctx := context.Background()
		for i := 0; time.Since(start) < span && r.err == nil; i++ {
			r.err = e.Submit(ctx, requestTo(testQueue, fmt.Sprint(i)))
		}
		if r.err == nil {
			r.err = e.Flush(ctx)
		}
		r.created, r.rejected, _ = f.counts(testQueue)
		r.perSecond = float64(r.created) / time.Since(start).Seconds()
		if a != nil {
			r.decreases = a.Queue(testQueue).Decreases
		}
	})
	return r
}

// sporadicRatio is the created rate with adaptive concurrency on over the rate with it off,
// both against a fake with latency that refuses share of the creates at random (seed).
func sporadicRatio(t *testing.T, latency time.Duration, share float64, seed uint64, span time.Duration) (ratio float64, on sporadicRun) {
	fake := func() *throttlingFake { return &throttlingFake{latency: latency, refuse: share, seed: seed} }
	off := runSporadic(t, fake(), false, span)
	on = runSporadic(t, fake(), true, span)
	require.NoError(t, off.err)
	require.NoError(t, on.err)
	return on.perSecond / off.perSecond, on
}

func TestASteadyShareOfRefusalsDoesNotRatchetTheRateDown(t *testing.T) {
	// One engine, a 5 ms round trip, a cap of 100, two and ten percent of the creates refused
	// at random whatever the rate. The controller that lowered its rate at every refusal
	// fell from about 13,000 creates/s to under 80 at 2% (adaptive_sporadic_test.go's matrix
	// has the figures); slow start now goes on through such a share, and the engine creates
	// at least four fifths of what it does with adaptive concurrency off under the same
	// refusals (the refused creates are retried either way).
	for _, share := range []float64{0.02, 0.10} {
		ratio, on := sporadicRatio(t, 5*time.Millisecond, share, 1, 4*time.Second)
		t.Logf("%.0f%% refused: %.0f creates/s, %.2f of adaptive off, %d decreases", 100*share, on.perSecond, ratio, on.decreases)
		assert.GreaterOrEqual(t, ratio, 0.8, "%.0f%% refused", 100*share)
		if share < 0.05 {
			// At 10%, slow start's test takes a run of refusals for a quota's now and then
			// (4 runs in 20 here); the restart after a collapse takes the rate back up, and the
			// ratio above holds all the same.
			assert.Zero(t, on.decreases, "%.0f%% refused: slow start went on through the share", 100*share)
		}
	}
}

func TestABurstOfRefusalsCostsAtMostOneDecrease(t *testing.T) {
	// A burst of 40 refusals, at the first creates or a tenth of a second into slow start, at
	// round trips of 1, 5 and 200 ms. The controller that decreased once per round trip of
	// refusals made up to 40 decreases of such a burst and took 10 s for 2,000 creates at
	// 5 ms. Before anything was accepted refusals leave slow start alone; later, the run of
	// refusals ends slow start once, at the rate the queue had accepted, and the rest of the
	// run lowers it no further.
	for _, latency := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 200 * time.Millisecond} {
		for _, at := range []time.Duration{0, 100 * time.Millisecond} {
			synctest.Test(t, func(t *testing.T) {
				a := NewAdaptive()
				f := (&throttlingFake{latency: latency, burstAt: at, burstN: 40}).init()
				start := time.Now()
				require.NoError(t, run(context.Background(), f, adaptiveOptions(a), testQueue, 2000))
				got := a.Queue(testQueue)
				created, rejected, _ := f.counts(testQueue)
				t.Logf("latency %v, burst at %v: 2,000 creates in %v, %d refused, %+v", latency, at, time.Since(start), rejected, got)
				assert.Equal(t, 2000, created)
				assert.Equal(t, 40, rejected)
				if at == 0 {
					assert.Zero(t, got.Decreases, "latency %v: nothing was accepted before the burst", latency)
				} else {
					assert.LessOrEqual(t, got.Decreases, 1, "latency %v", latency)
				}
			})
		}
	}
}

// sporadicMatrixEnv runs TestSporadicMatrix, the table of docs/performance-history.md.
const sporadicMatrixEnv = "CLOUDTASKSIO_SPORADIC_MATRIX"

// TestSporadicMatrix prints, for round trips of 5 and 200 ms and 0, 2, 5 and 10% of creates
// refused at random, the created rate with adaptive concurrency on as a share of the rate with
// it off, over 5 s of fake time and five seeds (docs/performance-history.md).
func TestSporadicMatrix(t *testing.T) {
	if os.Getenv(sporadicMatrixEnv) == "" {
		t.Skipf("the sporadic matrix takes about a minute of CPU: set %s=1 to run it", sporadicMatrixEnv)
	}
	for _, latency := range []time.Duration{5 * time.Millisecond, 200 * time.Millisecond} {
		for _, share := range []float64{0, 0.02, 0.05, 0.10} {
			var ratios, rates []float64
			var decreases []int
			for seed := range uint64(5) {
				ratio, on := sporadicRatio(t, latency, share, seed, 5*time.Second)
				ratios, rates, decreases = append(ratios, ratio), append(rates, on.perSecond), append(decreases, on.decreases)
			}
			slices.Sort(ratios)
			slices.Sort(rates)
			t.Logf("latency=%v refused=%.0f%%: on/off %.2f (median %.2f), on %.0f-%.0f creates/s, decreases %v",
				latency, 100*share, ratios, ratios[2], rates[0], rates[4], decreases)
		}
	}
}
