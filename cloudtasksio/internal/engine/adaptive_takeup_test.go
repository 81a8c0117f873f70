package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/stretchr/testify/assert"
)

// takeUpResult is what takeUp measured after the quota grew.
type takeUpResult struct {
	took     time.Duration // until the created rate over 500 ms reached 90% of the new quota; -1: never
	rejected int           // rejected attempts from the change to the end of the watch
	created  int           // tasks created from the change to the end of the watch
	// perSecond counts the created tasks and rejected attempts of every second of the run.
	perSecond [][2]int
}

// takeUp runs one worker process of sixteen engines writing to testQueue without end, at a
// round trip of rtt, each engine with maxInFlight creates in flight at most, against a quota of
// before creates per second (its share of a quota it
// shares with others) until it is paced near it; at settle the quota becomes after (the others
// finished, or scaled down). It measures how long the process takes to take up the new quota,
// watching for at most watch.
func takeUp(t *testing.T, rtt time.Duration, maxInFlight int, before, after float64, settle, watch time.Duration) (r takeUpResult) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := (&throttlingFake{perSecond: before, burst: before / 10, latency: rtt, slowRejection: true}).init()
		var mu sync.Mutex
		var created, rejected []time.Duration
		creator := CreatorFunc(func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
			task, err := f.CreateTask(ctx, req)
			at := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rejected = append(rejected, at)
			} else {
				created = append(created, at)
			}
			return task, err
		})
		var stop atomic.Bool
		var wg sync.WaitGroup
		a := NewAdaptive()
		for i := range 16 {
			wg.Go(func() {
				o := adaptiveOptions(a)
				o.MaxInFlight = maxInFlight
				for b := 0; !stop.Load(); b++ {
					e := New[string](creator, o, nil)
					for j := range 500 {
						if e.Submit(context.Background(), requestTo(testQueue, fmt.Sprint(i, "-", b, "-", j))) != nil {
							break
						}
					}
					_ = e.Flush(context.Background())
				}
			})
		}
		time.Sleep(settle)
		f.mu.Lock()
		f.perSecond, f.burst = after, after/10
		f.mu.Unlock()
		time.Sleep(watch)
		stop.Store(true)
		wg.Wait()

		r.took = -1
		const window = 500 * time.Millisecond
		from := 0
		for from < len(created) && created[from] < settle {
			from++
		}
		for i, j := from, from; j < len(created); j++ {
			for created[j]-created[i] > window {
				i++
			}
			if float64(j-i+1) >= 0.9*after*window.Seconds() {
				r.took = created[j] - settle
				break
			}
		}
		r.created = len(created) - from
		// Bundles under way when the watch ended finish after it.
		r.perSecond = make([][2]int, int(time.Since(start)/time.Second)+1)
		for _, at := range created {
			r.perSecond[int(at/time.Second)][0]++
		}
		for _, at := range rejected {
			r.perSecond[int(at/time.Second)][1]++
		}
		for _, at := range rejected {
			if at >= settle {
				r.rejected++
			}
		}
	})
	return r
}

func TestAProcessLeftAloneTakesUpTheQuotaItsPeersLeft(t *testing.T) {
	// One of eight processes that shared a quota of 1,000 creates a second, paced near its
	// share of 125/s, is left alone with the whole quota. Growing by at most
	// maxGrowthPerRound of its rate a round trip, it took 13.1-13.3 s to reach 900/s at 200
	// ms and 2.9-3.5 s at 30 ms (at ec35bd6); probing past the rate the queue last refused
	// once no decrease came for growthDoublings*growthDoubling, it takes 3.5-4.6 s and
	// 2.1-3.0 s.
	for rtt, limit := range map[time.Duration]time.Duration{30 * time.Millisecond: 4 * time.Second, 200 * time.Millisecond: 6 * time.Second} {
		t.Run(rtt.String(), func(t *testing.T) {
			r := takeUp(t, rtt, 1000, 125, 1000, 10*time.Second, 20*time.Second)
			t.Logf("round trip %v: 90%% of the new quota after %v, %d rejected attempts for %d created in the %v after the change", rtt, r.took, r.rejected, r.created, 20*time.Second)
			t.Logf("created and rejected per second, the change at %v: %v", 10*time.Second, r.perSecond)
			assert.Less(t, float64(r.rejected), 0.05*float64(r.created), "taking up the quota is not a storm of rejections")
			if assert.GreaterOrEqual(t, r.took, time.Duration(0), "the process never took up the quota") {
				assert.Less(t, r.took, limit)
			}
		})
	}
	// Sixteen engines of 20 creates in flight each can send 1,600 a second at 200 ms, more
	// than one engine's MaxInFlight over the round trip (100 a second): the rate grows past
	// that into the quota.
	t.Run("200ms/MaxInFlight=20", func(t *testing.T) {
		r := takeUp(t, 200*time.Millisecond, 20, 125, 1000, 10*time.Second, 20*time.Second)
		t.Logf("90%% of the new quota after %v, %d rejected attempts for %d created", r.took, r.rejected, r.created)
		if assert.GreaterOrEqual(t, r.took, time.Duration(0), "the process never took up the quota") {
			assert.Less(t, r.took, 6*time.Second)
		}
	})
}
