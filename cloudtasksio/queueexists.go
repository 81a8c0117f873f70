package cloudtasksio

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// Delete's queue check. A NOT_FOUND answer to a delete counts as done when its message does not
// mention the queue (engine.ClassifyDelete), and the service's text for a delete into a missing
// queue is not known to mention it. So, before a bundle whose deletes met such answers ends,
// the sink reads each of their queues, once per worker process, through the preflight's reader
// and cache: a missing queue fails the bundle instead of letting its deletes count as done.

// preflightExists is the mode of the preflight key under which Delete's queue reads are kept:
// apart from the modes Write's reads use, since it asks only whether the queue is there.
const preflightExists QueuePreflight = -1

// readerOf returns the preflighter's queue reader: the shared v2 client of its client setting,
// unless a test gave its own.
func (p *queuePreflighter) readerOf() queueReader {
	if p.reader == nil {
		p.reader = v2QueueReader{spec: p.client}
	}
	return p.reader
}

// confirmQueues checks that each of queues exists, reading at most maxPendingReads of them at
// a time, and returns each one's failure, nil when it exists. A queue the process has read
// already costs a cache lookup.
func (p *queuePreflighter) confirmQueues(ctx context.Context, queues []string) []error {
	errs := make([]error, len(queues))
	var pending []int
	results := make([]func(context.Context) (*preflightResult, error), len(queues))
	wait := func() {
		i := pending[0]
		_, errs[i] = results[i](ctx)
		pending = pending[1:]
	}
	for i, queue := range queues {
		results[i], _ = p.cacheOf().Start(preflightKey{client: p.client, queue: queue, mode: preflightExists}, p.existenceOf(queue))
		if pending = append(pending, i); len(pending) > maxPendingReads {
			wait()
		}
	}
	for len(pending) > 0 {
		wait()
	}
	return errs
}

// existenceOf returns the read of queue for confirmQueues, on a context of its own, as the
// preflight's reads: it serves every instance of the process that waits for it.
func (p *queuePreflighter) existenceOf(queue string) func() (*preflightResult, error) {
	reader := p.readerOf()
	return func() (*preflightResult, error) {
		ctx := context.Background()
		_, err := reader.readQueue(ctx, queue)
		return existence(ctx, queue, err)
	}
}

// existence decides what a read of queue for Delete means. A queue read is a success; NOT_FOUND
// proves the queue missing and fails the bundle, remembered for gcpconn.FailureTTL.
// PERMISSION_DENIED and UNIMPLEMENTED cannot tell: the deletes count as they were answered, with
// one log line per process. A failure of the moment (engine.Classify: UNAVAILABLE,
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED) fails the bundle and is not remembered, so the next
// bundle reads again; any other failure fails the bundle, remembered for gcpconn.FailureTTL.
func existence(ctx context.Context, queue string, err error) (*preflightResult, error) {
	code := engine.OutermostCode(err)
	switch c := status.Code(err); {
	case err == nil:
		return &preflightResult{}, nil
	case c == codes.NotFound:
		return nil, fmt.Errorf("queue %s does not exist (GetQueue answered NOT_FOUND), so the NOT_FOUND answers to its deletes "+
			"do not mean that the tasks are gone: its deletes were not done; fix DeleteConfig.Queue or DeleteConfig.QueueFn, or create the queue: %w",
			queue, err)
	case c == codes.PermissionDenied || c == codes.Unimplemented:
		warnf(ctx, "Delete: cannot confirm that queue %s exists (GetQueue answered %s); its deletes answered NOT_FOUND count as tasks already gone "+
			"(grant cloudtasks.queues.get, for example with roles/cloudtasks.viewer, to have a missing queue fail the bundle)", queue, code)
		return &preflightResult{refused: c}, nil
	}
	failed := fmt.Errorf("confirming that queue %s exists failed with %s, so the NOT_FOUND answers to its deletes cannot count as done; "+
		"a later bundle reads the queue again", queue, code)
	if engine.Classify(err, false) == engine.Transient {
		return nil, gcpconn.Transient(failed)
	}
	return nil, failed
}
