package cloudtasksio

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

func TestPerQueueStateDroppedDuringBundlesIsRebuiltAndTheClientStaysOpen(t *testing.T) {
	const queues = 12
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	for i := range queues {
		_, err := srv.CreateQueue("projects/p/locations/l/queues/" + manyQueueName(i))
		require.NoError(t, err)
	}
	reads := countGetQueue(srv)
	// PreflightFail: each queue's read ends before its first create, so no bundle ends with
	// a read under way that the next would share instead of reading. At most 3 creates in flight: a queue with a create in flight is in use, and the adaptive
	// state never drops a queue in use, so with more in flight at once (the creates of one
	// bundle answered slowly) it would rightly keep more than 3 queues.
	cfg := Config{QueueFn: queueOfSpreadOrder, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		EmulatorEndpoint: srv.Addr, Writer: WriterOptions{MaxInFlightTasks: 3, QueuePreflight: PreflightFail}}
	spec, err := compile(cfg, typeOf(spreadOrder{}))
	require.NoError(t, err)

	// Two DoFn instances of one process, with per-queue state bounded at 3 queues instead of
	// 10,000, so that a bundle over 12 queues drops state while creates are in flight.
	states := &gcpconn.Cache[preflightKey, *preflightResult]{MaxEntries: 3}
	limits := engine.NewAdaptive()
	limits.MaxQueues = 3
	instances := make([]*writeFn, 2)
	for i := range instances {
		f := &writeFn{Spec: spec}
		require.NoError(t, f.Setup())
		f.preflight.cache = states
		f.adaptive = limits
		instances[i] = f
	}
	client, err := sharedClient(t.Context(), spec.client)
	require.NoError(t, err)

	ctx, counters := metricsContext()
	for bundle := range 3 {
		for n, f := range instances {
			require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
			for i := range queues {
				require.NoError(t, f.ProcessElement(ctx, 0, spreadOrder{Queue: manyQueueName(i), ID: bundle*100 + n*10 + i}, discardDeadLetters))
			}
			require.NoError(t, f.FinishBundle(ctx, discardDeadLetters), "bundle %d of instance %d", bundle, n)
			assert.LessOrEqual(t, states.Len(), 3)
			assert.LessOrEqual(t, limits.Len(), 3)
		}
	}
	again, err := sharedClient(t.Context(), spec.client)
	require.NoError(t, err)
	assert.Same(t, client, again, "the client is never dropped or replaced")
	total := 0
	for i := range queues {
		total += len(srv.Tasks("projects/p/locations/l/queues/" + manyQueueName(i)))
	}
	assert.Equal(t, 3*2*queues, total, "every task was created through the one client")
	assert.Zero(t, counters()[MetricRecordsSendErrors])
	assert.Equal(t, int64(3*2*queues), reads.Load(),
		"with room for 3 queues, each queue's preflight was dropped before it came back, and read again each time")
}

// processCaches are the package-level caches of a worker process, by name: caches.go
// documents each (what it holds, its key, its bound).
var processCaches = []string{"v2Clients", "betaClients", "adaptives", "preflights", "queueHealths", "destinationFailures", "verified"}

// TestEveryProcessCacheIsDeclaredInCachesGo finds every package-level variable of a cache type
// (gcpconn.Cache, clientCache, failedDestinations, sync.Map) in the package's files, and wants exactly the
// documented ones, all in caches.go, each with a doc comment that gives its key and bound.
func TestEveryProcessCacheIsDeclaredInCachesGo(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	found := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				typ := vs.Type
				if typ == nil && len(vs.Values) == 1 {
					if lit, ok := vs.Values[0].(*ast.CompositeLit); ok {
						typ = lit.Type
					}
				}
				if typ == nil || !regexp.MustCompile(`^(gcpconn\.Cache|clientCache)\[|^(failedDestinations|sync\.Map)$`).MatchString(types.ExprString(typ)) {
					continue
				}
				doc := vs.Doc
				if doc == nil {
					doc = gd.Doc
				}
				for _, n := range vs.Names {
					found[n.Name] = name
					if assert.NotNil(t, doc, "%s in %s has no doc comment", n.Name, name) {
						assert.Contains(t, doc.Text(), "Key: ", "the doc of %s says its key", n.Name)
						assert.Contains(t, doc.Text(), "Bound: ", "the doc of %s says its bound", n.Name)
					}
				}
			}
		}
	}
	want := map[string]string{}
	for _, n := range processCaches {
		want[n] = "caches.go"
	}
	assert.Equal(t, want, found, "the process-wide caches, and the file of each")
}

// TestPerQueueCachesAreBoundedAndClientCachesAreNot checks the bounds caches.go documents: what
// a process keeps per queue is dropped after queueStateIdleTTL unused and beyond
// maxQueueStates queues; the clients, and the adaptive states, one per client setting, are
// never dropped (a dropped client would leak its connections: it is never closed).
func TestPerQueueCachesAreBoundedAndClientCachesAreNot(t *testing.T) {
	require.Positive(t, queueStateIdleTTL)
	require.Positive(t, maxQueueStates)
	assert.Equal(t, queueStateIdleTTL, preflights.IdleTTL, "preflights")
	assert.Equal(t, maxQueueStates, preflights.MaxEntries, "preflights")
	assert.Equal(t, queueStateIdleTTL, queueHealths.IdleTTL, "queueHealths")
	assert.Equal(t, maxQueueStates, queueHealths.MaxEntries, "queueHealths")
	assert.Equal(t, queueStateIdleTTL, verified.IdleTTL, "verified")
	assert.Equal(t, maxQueueStates, verified.MaxEntries, "verified")
	assert.Equal(t, maxQueueStates, destinationFailures.MaxEntries, "destinationFailures")
	assert.Equal(t, gcpconn.FailureTTL, destinationFailures.TTL, "destinationFailures: a failed queue is remembered as a failed read is")
	a := newAdaptive()
	assert.Equal(t, queueStateIdleTTL, a.IdleTTL, "the per-queue limits of an adaptive state")
	assert.Equal(t, maxQueueStates, a.MaxQueues, "the per-queue limits of an adaptive state")
	on := &sinkSpec{client: clientSpec{EmulatorEndpoint: "bounds.test:1"}, Config: Config{Writer: WriterOptions{AdaptiveConcurrency: AdaptiveConcurrencyOn}}}
	assert.Equal(t, maxQueueStates, adaptiveFor(on).MaxQueues, "the states the create DoFns use are built by newAdaptive")

	for name, c := range map[string][2]int64{
		"v2Clients":   {int64(v2Clients.clients.IdleTTL), int64(v2Clients.clients.MaxEntries)},
		"betaClients": {int64(betaClients.clients.IdleTTL), int64(betaClients.clients.MaxEntries)},
		"adaptives":   {int64(adaptives.IdleTTL), int64(adaptives.MaxEntries)},
	} {
		assert.Equal(t, [2]int64{0, 0}, c, "%s is keyed by client setting and keeps its entries for the life of the process", name)
	}
}

// ownSettings counts the names ownSetting has handed out.
var ownSettings atomic.Int64

// ownSetting returns name followed by a number no other call in this process returned. A test
// that keys the process-wide caches (caches.go) with a client setting, a key file or a queue of
// its own takes it from here: a fixed name would be shared with the earlier runs of the same
// test (go test -count=N runs every test N times in one process, the caches filled by the
// runs before), whose reads, verdicts, failures and limits it would find already there.
func ownSetting(name string) string {
	return fmt.Sprintf("%s-%d", name, ownSettings.Add(1))
}

// TestRetentionVerdictsAreBoundedToMaxQueueStates drives the process's own verified cache
// through verifyRetention over more queues than maxQueueStates: it never holds more, and the
// queue dropped first (the least recently used) is read again when it comes back.
func TestRetentionVerdictsAreBoundedToMaxQueueStates(t *testing.T) {
	r := &fakeRetention{ttl: time.Hour, ok: true}
	spec := clientSpec{EmulatorEndpoint: ownSetting("bounds") + ".test:2"}
	queue := func(i int) string { return fmt.Sprintf("projects/p/locations/l/queues/bound-%d", i) }
	for i := range maxQueueStates + 10 {
		require.NoError(t, verifyRetention(t.Context(), r, spec, queue(i), time.Hour))
		require.LessOrEqual(t, verified.Len(), maxQueueStates)
	}
	assert.Equal(t, maxQueueStates+10, r.calls)
	require.NoError(t, verifyRetention(t.Context(), r, spec, queue(0), time.Hour))
	assert.Equal(t, maxQueueStates+11, r.calls, "the least recently used queue was dropped, and is read again")
	require.NoError(t, verifyRetention(t.Context(), r, spec, queue(maxQueueStates+9), time.Hour))
	assert.Equal(t, maxQueueStates+11, r.calls, "a recent queue is kept")
}
