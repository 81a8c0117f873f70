package adaptive

// Which queues an Adaptive (controller.go) keeps: the engines that watch a
// queue for releases, when a queue is idle, and forgetting the idle ones
// beyond IdleTTL and MaxQueues.

import "time"

// Watch makes releases for queue signal ch (buffered, capacity 1); cap and
// startRate are the watching engine's, as for Acquire.
func (a *Adaptive) Watch(queue string, cap int, startRate float64, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queue(queue, cap, startRate, time.Now())
	defer a.settle(q)
	if q.waiters == nil {
		q.waiters = map[chan struct{}]struct{}{}
	}
	q.waiters[ch] = struct{}{}
}

// Unwatch stops releases for queue from signalling ch.
func (a *Adaptive) Unwatch(queue string, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q := a.queues[queue]; q != nil {
		delete(q.waiters, ch)
		a.settle(q)
	}
}

// settle puts q on the idle list when nothing is in flight to it and no
// engine waits for it, and takes it off when either changes.
func (a *Adaptive) settle(q *queueLimit) {
	idle := q.inFlight == 0 && len(q.waiters) == 0
	switch {
	case idle && q.idleEl == nil:
		q.idleSince = time.Now()
		q.idleEl = a.idle.PushFront(q)
	case !idle && q.idleEl != nil:
		a.idle.Remove(q.idleEl)
		q.idleEl = nil
	}
}

// forgetIdle forgets the queues idle for IdleTTL, and the longest idle ones
// while a new queue would take the Adaptive beyond MaxQueues.
func (a *Adaptive) forgetIdle(now time.Time) {
	for el := a.idle.Back(); el != nil; el = a.idle.Back() {
		q := el.Value.(*queueLimit)
		expired := a.IdleTTL > 0 && now.Sub(q.idleSince) >= a.IdleTTL
		full := a.MaxQueues > 0 && len(a.queues) >= a.MaxQueues
		if !expired && !full {
			return
		}
		a.idle.Remove(el)
		delete(a.queues, q.path)
	}
}

// Len returns the number of queues the Adaptive keeps.
func (a *Adaptive) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.queues)
}
