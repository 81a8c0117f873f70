package cloudtaskstest

// The heap of a queue's tasks waiting for dispatch, and how stale items leave it.

import (
	"container/heap"
	"time"
)

type dueItem struct {
	at  time.Time
	seq uint64
	gen uint64
	e   *taskEntry
}

// dueHeap orders tasks waiting for dispatch. Items go stale when their task
// is removed or leaves the heap another way (its gen changes); stale items
// are dropped when they reach the top.
type dueHeap []dueItem

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func (qd *queueDispatch) push(e *taskEntry) {
	heap.Push(&qd.due, dueItem{at: e.t.GetScheduleTime().AsTime(), seq: e.seq, gen: e.d.gen, e: e})
}

// compact drops the stale items once they outnumber the live ones (at least minCompact
// items in all): a queue whose items never reach the top (no dispatcher, a paused or disabled
// queue) would otherwise keep every deleted task, body and all, for the life of the server.
func (qd *queueDispatch) compact(live int) {
	const minCompact = 64
	if len(qd.due) < minCompact || len(qd.due) <= 2*live {
		return
	}
	kept := qd.due[:0]
	for _, it := range qd.due {
		if !it.e.d.removed && it.gen == it.e.d.gen {
			kept = append(kept, it)
		}
	}
	clear(qd.due[len(kept):]) // the dropped items' tasks can be collected
	qd.due = kept
	heap.Init(&qd.due)
}

// top returns the earliest live item, dropping stale ones.
func (qd *queueDispatch) top() (dueItem, bool) {
	for len(qd.due) > 0 {
		it := qd.due[0]
		if !it.e.d.removed && !it.e.d.running && it.gen == it.e.d.gen {
			return it, true
		}
		heap.Pop(&qd.due)
	}
	return dueItem{}, false
}
