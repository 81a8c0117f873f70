package cloudtaskstest

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The create quota: a token bucket per queue in front of CreateTask, the
// way the service answers RESOURCE_EXHAUSTED when a queue takes more creates
// per second than its quota allows. The same bucket type paces dispatch
// (dispatch.go).

// tokenBucket holds tokens refilled at a rate up to a capacity. Its owner
// guards it (store.mu).
type tokenBucket struct {
	tokens   float64
	refilled time.Time // zero until the first refill: the bucket starts full
}

// refill adds the tokens earned since the last refill, up to burst. A now before the last
// refill's (a caller that read the clock, then waited for the lock behind a later one) earns
// nothing and leaves the bucket's clock where it is: moving it back would earn that interval
// a second time, and under many concurrent creates the queue would accept more than its rate.
func (b *tokenBucket) refill(now time.Time, rate, burst float64) {
	switch {
	case b.refilled.IsZero():
		b.tokens = burst
	case now.After(b.refilled):
		b.tokens += now.Sub(b.refilled).Seconds() * rate
	default:
		return
	}
	b.tokens = min(b.tokens, burst)
	b.refilled = now
}

// ready reports whether a whole token is available.
func (b *tokenBucket) ready() bool { return b.tokens >= 1-tokenEpsilon }

// untilReady is how long, at rate, until a whole token is available (0 when
// one is), never more than maxWait.
func (b *tokenBucket) untilReady(rate float64) time.Duration {
	if b.ready() {
		return 0
	}
	need := math.Ceil((1 - b.tokens) / rate * float64(time.Second))
	return time.Duration(min(need, float64(maxWait)))
}

// CreateQuota limits how many CreateTask calls a queue accepts per second,
// as the service's per-queue quota does. Each queue it applies to has its
// own token bucket of Burst tokens, refilled continuously at PerSecond
// tokens per second; the bucket starts full. A CreateTask into the queue
// takes a token, or, when none is left, is answered RESOURCE_EXHAUSTED and
// stores nothing. The zero CreateQuota means no quota.
type CreateQuota struct {
	// PerSecond is the sustained rate of creates the queue accepts: a
	// finite number above zero, or zero for no quota.
	PerSecond float64
	// Burst is how many creates the queue accepts at once after a quiet
	// spell: the bucket's capacity. 0 picks PerSecond rounded up (at least
	// 1); it must not be negative.
	Burst int
	// RetryInfo makes every rejection carry a google.rpc.RetryInfo detail
	// whose retry_delay is the time until the queue's bucket holds a token
	// again, as the service may send. Without it the rejection carries no
	// details.
	RetryInfo bool
}

// validate checks q, naming the function the test called.
func (q CreateQuota) validate(fn string) error {
	if math.IsNaN(q.PerSecond) || math.IsInf(q.PerSecond, 0) || q.PerSecond < 0 {
		return fmt.Errorf("cloudtaskstest.%s: CreateQuota.PerSecond %v is not a finite number >= 0", fn, q.PerSecond)
	}
	if q.Burst < 0 {
		return fmt.Errorf("cloudtaskstest.%s: CreateQuota.Burst %d is negative", fn, q.Burst)
	}
	if q.PerSecond == 0 && (q.Burst != 0 || q.RetryInfo) {
		return fmt.Errorf("cloudtaskstest.%s: CreateQuota.Burst and RetryInfo need a PerSecond above zero", fn)
	}
	return nil
}

// burst is the bucket's capacity.
func (q CreateQuota) burst() float64 {
	if q.Burst > 0 {
		return float64(q.Burst)
	}
	return max(1, math.Ceil(q.PerSecond))
}

// AllQueues is the queue path that, given to WithCreateQuota or
// SetCreateQuota, applies a CreateQuota to every queue that has no quota of
// its own. Each queue still has its own bucket.
const AllQueues = "*"

// WithCreateQuota sets the create quota of the queue at queuePath
// ("projects/P/locations/L/queues/Q", which need not exist yet), or of every
// queue without a quota of its own when queuePath is AllQueues. Give it
// several times for several queues. NewServerWithAddress reports a bad path
// or quota (see CreateQuota) as an error, and NewServer panics with it.
// Server.SetCreateQuota changes quotas later.
func WithCreateQuota(queuePath string, q CreateQuota) Option {
	return func(c *config) {
		c.quotas = append(c.quotas, quotaSetting{queue: queuePath, q: q})
	}
}

type quotaSetting struct {
	queue string
	q     CreateQuota
}

// checkQuota validates a quota setting.
func checkQuota(fn, queuePath string, q CreateQuota) error {
	if queuePath != AllQueues {
		if err := checkQueueName("queue path", queuePath); err != nil {
			return fmt.Errorf("cloudtaskstest.%s: %s", fn, status.Convert(err).Message())
		}
	}
	return q.validate(fn)
}

// SetCreateQuota replaces the create quota of the queue at queuePath (which
// need not exist yet), or of every queue without a quota of its own when
// queuePath is AllQueues. The zero CreateQuota removes it: the queue then
// falls back to the AllQueues quota, if any, or has none. Every bucket the
// change affects starts full again. It returns an error for a malformed
// path or a bad quota (see CreateQuota), and changes nothing then.
func (s *Server) SetCreateQuota(queuePath string, q CreateQuota) error {
	if err := checkQuota("SetCreateQuota", queuePath, q); err != nil {
		return err
	}
	s.store.setQuota(queuePath, q)
	return nil
}

// quotaState is the store's create quotas and buckets, guarded by store.mu.
type quotaState struct {
	byQueue map[string]CreateQuota  // queue path or AllQueues -> quota
	buckets map[string]*tokenBucket // queue path -> its bucket
}

func (st *store) setQuota(queuePath string, q CreateQuota) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if q.PerSecond == 0 {
		delete(st.quota.byQueue, queuePath)
	} else {
		st.quota.byQueue[queuePath] = q
	}
	if queuePath == AllQueues {
		clear(st.quota.buckets)
	} else {
		delete(st.quota.buckets, queuePath)
	}
}

// takeCreateTokenLocked spends a token of the queue's create quota, or returns
// the RESOURCE_EXHAUSTED answer when none is left. mu must be held.
func (st *store) takeCreateTokenLocked(queuePath string, now time.Time) error {
	q, ok := st.quota.byQueue[queuePath]
	if !ok {
		if q, ok = st.quota.byQueue[AllQueues]; !ok {
			return nil
		}
	}
	b := st.quota.buckets[queuePath]
	if b == nil {
		b = &tokenBucket{}
		st.quota.buckets[queuePath] = b
	}
	b.refill(now, q.PerSecond, q.burst())
	if b.ready() {
		b.tokens--
		return nil
	}
	stt := status.New(codes.ResourceExhausted, fmt.Sprintf(
		"Quota exceeded: queue %s accepts %v creates per second (cloudtaskstest create quota)", shortID(queuePath), q.PerSecond))
	if q.RetryInfo {
		if d, err := stt.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(b.untilReady(q.PerSecond))}); err == nil {
			stt = d
		}
	}
	return &quotaError{st: stt}
}

// quotaError is a create the quota rejected; the interceptor counts it.
type quotaError struct{ st *status.Status }

func (e *quotaError) Error() string              { return e.st.Err().Error() }
func (e *quotaError) GRPCStatus() *status.Status { return e.st }

func isQuotaRejection(err error) bool {
	var qe *quotaError
	return errors.As(err, &qe)
}
