package cloudtaskstest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Refusals that do not follow the rate of calls. A create quota (WithCreateQuota) refuses
// more as a client sends faster; the service also refuses for reasons of its own, such as
// another job spending the project's quota or a front end shedding load. These reactors
// stand for those: a steady share of refusals whatever the rate, and one burst.

// RefuseAtRandom returns a Reactor that answers RESOURCE_EXHAUSTED to each call it sees
// with probability share, whatever the rate of calls, and lets the others go on to be
// served. Add it with AddReactor("CreateTask", ...). The draws come from a generator seeded
// with seed, so the same seed refuses the same calls in their order of arrival. A refused
// call stores nothing and counts in Stats().InjectedErrors. It panics unless 0 <= share <= 1.
func RefuseAtRandom(share float64, seed uint64) Reactor {
	if math.IsNaN(share) || share < 0 || share > 1 {
		panic(fmt.Sprintf("cloudtaskstest.RefuseAtRandom: share %v is not a number from 0 to 1", share))
	}
	r := &randomRefusals{share: share, rng: rand.New(rand.NewPCG(seed, seed))}
	r.err = status.Errorf(codes.ResourceExhausted, "cloudtaskstest: refused at random (%g of calls)", share)
	return r
}

type randomRefusals struct {
	share float64
	err   error
	mu    sync.Mutex
	rng   *rand.Rand
}

func (r *randomRefusals) React(proto.Message) (bool, proto.Message, error) {
	r.mu.Lock()
	refuse := r.rng.Float64() < r.share
	r.mu.Unlock()
	if refuse {
		return true, nil, r.err
	}
	return false, nil, nil
}

// RefuseBurst returns a Reactor that answers RESOURCE_EXHAUSTED to n calls in a row: those
// that arrive once after has passed since the first call it saw (after = 0: the first n
// calls), by time.Now. Every other call goes on to be served. Add it with
// AddReactor("CreateTask", ...); calls reach it after SetLatency's wait. A refused call
// stores nothing and counts in Stats().InjectedErrors. It panics if n or after is negative.
func RefuseBurst(n int, after time.Duration) Reactor {
	if n < 0 || after < 0 {
		panic(fmt.Sprintf("cloudtaskstest.RefuseBurst: n %d and after %v must not be negative", n, after))
	}
	return &burstRefusals{left: n, after: after,
		err: status.Errorf(codes.ResourceExhausted, "cloudtaskstest: refused in a burst of %d", n)}
}

type burstRefusals struct {
	after time.Duration
	err   error
	mu    sync.Mutex
	first time.Time // when the first call arrived; zero before
	left  int
}

func (r *burstRefusals) React(proto.Message) (bool, proto.Message, error) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first.IsZero() {
		r.first = now
	}
	if r.left == 0 || now.Sub(r.first) < r.after {
		return false, nil, nil
	}
	r.left--
	return true, nil, r.err
}
