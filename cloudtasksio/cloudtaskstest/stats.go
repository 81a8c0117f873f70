package cloudtaskstest

import (
	"maps"
	"sync"
)

// counters holds what Stats reports. It only counts: what the server
// answers is decided elsewhere (faults.go, the store, the dispatcher).
type counters struct {
	mu sync.Mutex
	st Stats
	// calls is the number of unary calls of any method being served now;
	// Wait waits for it to reach zero.
	calls int
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.st
	out.QuotaRejectionsByQueue = maps.Clone(c.st.QuotaRejectionsByQueue) // nil stays nil
	return out
}

func (c *counters) reset() {
	c.mu.Lock()
	c.st = Stats{
		CreateTaskInFlight: c.st.CreateTaskInFlight, MaxCreateTaskInFlight: c.st.CreateTaskInFlight,
		DispatchesInFlight: c.st.DispatchesInFlight, MaxDispatchesInFlight: c.st.DispatchesInFlight,
	}
	c.mu.Unlock()
}

func (c *counters) callsInFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// callStarted counts a call of any method; create says it is CreateTask.
func (c *counters) callStarted(create bool) {
	c.mu.Lock()
	c.calls++
	if create {
		c.st.CreateTaskCalls++
		c.st.CreateTaskInFlight++
		c.st.MaxCreateTaskInFlight = max(c.st.MaxCreateTaskInFlight, c.st.CreateTaskInFlight)
	}
	c.mu.Unlock()
}

// callEnded records how a call was answered.
func (c *counters) callEnded(create bool, o callOutcome) {
	c.mu.Lock()
	c.calls--
	if o.injected {
		c.st.InjectedErrors++
	}
	if create {
		c.st.CreateTaskInFlight--
		if o.stored {
			c.st.TasksCreated++
		}
		if o.lost {
			c.st.LostResponses++
		}
		if o.alreadyExists {
			c.st.AlreadyExists++
		}
		if o.quotaQueue != "" {
			c.st.QuotaRejections++
			if c.st.QuotaRejectionsByQueue == nil {
				c.st.QuotaRejectionsByQueue = map[string]int{}
			}
			c.st.QuotaRejectionsByQueue[o.quotaQueue]++
		}
	}
	c.mu.Unlock()
}

// callOutcome is what callEnded counts.
type callOutcome struct {
	injected      bool   // answered by a script or a reactor with an error
	stored        bool   // CreateTask stored its task
	lost          bool   // ... but answered UNAVAILABLE (LoseResponses)
	alreadyExists bool   // CreateTask answered ALREADY_EXISTS by the store
	quotaQueue    string // CreateTask rejected by this queue's create quota
}

func (c *counters) dispatchStarted() {
	c.mu.Lock()
	c.st.DispatchAttempts++
	c.st.DispatchesInFlight++
	c.st.MaxDispatchesInFlight = max(c.st.MaxDispatchesInFlight, c.st.DispatchesInFlight)
	c.mu.Unlock()
}

// dispatchEnded records an attempt's outcome: "done", "exhausted", "retry"
// or "gone".
func (c *counters) dispatchEnded(outcome string) {
	c.mu.Lock()
	c.st.DispatchesInFlight--
	switch outcome {
	case "done":
		c.st.TasksSucceeded++
	case "exhausted":
		c.st.TasksExhausted++
	}
	c.mu.Unlock()
}

// Stats returns the server's counters since it started or since the last
// ResetStats.
func (s *Server) Stats() Stats {
	return s.counts.snapshot()
}

// ResetStats zeroes the counters; MaxCreateTaskInFlight restarts from the
// number of CreateTask calls in flight now.
func (s *Server) ResetStats() {
	s.counts.reset()
}

// Stats counts what the server saw. CreateTask figures count calls that
// reached the server (a client's own retries count once per attempt).
type Stats struct {
	// CreateTaskCalls is the number of CreateTask calls received, including
	// those answered with an injected code.
	CreateTaskCalls int
	// TasksCreated is the number of tasks stored by CreateTask, including
	// those whose response was lost (LoseResponses).
	TasksCreated int
	// AlreadyExists is the number of CreateTask calls answered
	// ALREADY_EXISTS because the name was held or recently held. Injected
	// ALREADY_EXISTS answers are counted in InjectedErrors instead.
	AlreadyExists int
	// InjectedErrors is the number of calls, of any method, answered with a
	// scripted error (InjectErrors, InjectError) or an error from a Reactor.
	InjectedErrors int
	// LostResponses is the number of CreateTask calls that stored a task but
	// answered UNAVAILABLE because of LoseResponses.
	LostResponses int
	// QuotaRejections is the number of CreateTask calls answered
	// RESOURCE_EXHAUSTED by a create quota (WithCreateQuota,
	// SetCreateQuota). Such a call stores nothing. Injected
	// RESOURCE_EXHAUSTED answers are counted in InjectedErrors instead.
	QuotaRejections int
	// QuotaRejectionsByQueue splits QuotaRejections by queue path; nil
	// until the first rejection.
	QuotaRejectionsByQueue map[string]int
	// CreateTaskInFlight is the number of CreateTask calls being served now
	// (including the SetLatency wait).
	CreateTaskInFlight int
	// MaxCreateTaskInFlight is the highest CreateTaskInFlight seen.
	MaxCreateTaskInFlight int

	// DispatchAttempts is the number of dispatch attempts started, first
	// attempts and retries alike.
	DispatchAttempts int
	// TasksSucceeded is the number of tasks whose target answered 2xx (and
	// which were therefore removed).
	TasksSucceeded int
	// TasksExhausted is the number of tasks removed after their last allowed
	// attempt failed.
	TasksExhausted int
	// DispatchesInFlight is the number of attempts waiting for an answer now,
	// across all queues.
	DispatchesInFlight int
	// MaxDispatchesInFlight is the highest DispatchesInFlight seen.
	MaxDispatchesInFlight int
}
