package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEightEnginesOnThreeQueuesWithRandomRefusalsFinish(t *testing.T) {
	// Eight engines share one Adaptive, as the DoFn instances of a worker process do, and
	// write 300 tasks each spread over three queues, while the service refuses one create in
	// twenty at random whatever the rate. Every task is created and the engines finish within
	// a few seconds of fake time: the refusals cost retries, not the rate. (A controller that
	// lowered its rate at each of them stalled here: about 760 of the 2,400 creates in 60 s.)
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		f := (&throttlingFake{latency: 5 * time.Millisecond, refuse: 0.05, seed: 3}).init()
		queues := []string{testQueue, otherQueue, testQueue + "-third"}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				e := New[string](f, adaptiveOptions(a), nil)
				for j := range 300 {
					if errs[i] = e.Submit(context.Background(), requestTo(queues[j%3], fmt.Sprint(i, "-", j))); errs[i] != nil {
						return
					}
				}
				errs[i] = e.Flush(context.Background())
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		for i, err := range errs {
			require.NoError(t, err, "engine %d", i)
		}
		var created, rejected int
		for _, q := range queues {
			c, r, _ := f.counts(q)
			created += c
			rejected += r
			assert.Zero(t, a.Queue(q).InFlight, "queue %s: every permit came back", q)
		}
		t.Logf("2,400 creates in %v, %d refused", elapsed, rejected)
		assert.Equal(t, 2400, created)
		assert.Less(t, elapsed, 3*time.Second, "the refusals did not ratchet the rate down")
	})
}
