package cloudtasksio

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// syncLogs is what the package logs, for a test that reads it while a goroutine it does not
// wait for may write to it: under PreflightWarn a queue read logs its findings as it ends,
// whichever bundle is running.
type syncLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the lines logged so far that contain containing.
func (l *syncLogs) lines(containing string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return logLines(&l.buf, containing)
}

// captureSyncLogs is captureLogs into a syncLogs.
func captureSyncLogs(t *testing.T) *syncLogs {
	t.Helper()
	captureLogs(t) // puts Beam's logger on slog's default, and that back at the end
	l := &syncLogs{}
	slog.SetDefault(slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return l
}

// readsEnd waits until the reads p has pending have ended, as time passing between bundles
// would, without counting what they found.
func readsEnd(p *queuePreflighter) {
	for _, r := range p.pending {
		_, _ = r.result(context.Background())
	}
}

// A one-element bundle whose create takes 3ms must end after about 3ms under PreflightWarn,
// not behind a slow queue read (up to preflightReadTimeout): the warning is logged when the
// read ends, and counted by a later bundle. Under PreflightFail the element still waits for
// the read, and the bundle fails on what it found.
func TestUnderPreflightWarnFinishBundleDoesNotWaitForASlowQueueRead(t *testing.T) {
	const createTime, readTime = 3 * time.Millisecond, 4 * time.Second
	for _, mode := range []QueuePreflight{PreflightWarn, PreflightFail} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				spec, err := compile(Config{Queue: Queue{Project: "p", Location: "l", Name: "q"},
					HTTP:             &HTTPTarget{URL: "https://example.com/orders"},
					Writer:           WriterOptions{QueuePreflight: mode},
					EmulatorEndpoint: ownSetting("preflight-no-wait-"+mode.String()) + ".invalid:1"}, typeOf(urlOrder{}))
				require.NoError(t, err)
				f := &writeFn{Spec: spec}
				require.NoError(t, f.Setup())
				reader := &scriptedQueueReader{delay: readTime}
				reader.set(cloudtaskspb.Queue_PAUSED, nil)
				f.preflight.reader, f.preflight.cache = reader, &gcpconn.Cache[preflightKey, *preflightResult]{}
				created := 0
				creator := engine.CreatorFunc(func(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
					time.Sleep(createTime)
					created++
					return req.GetTask(), nil
				})
				logs := captureSyncLogs(t)
				ctx, counters := metricsContext()
				bundle := func(elems ...urlOrder) error {
					f.start(creator, engineOptions(f.Spec.Writer), f) // StartBundle without a Cloud Tasks client
					f.emit = discardDeadLetters
					for _, e := range elems {
						if err := f.ProcessElement(ctx, 0, e, discardDeadLetters); err != nil {
							return err
						}
					}
					return f.FinishBundle(ctx, discardDeadLetters)
				}

				start := time.Now()
				err = bundle(urlOrder{ID: "only"})
				took := time.Since(start)
				if mode == PreflightFail {
					require.Error(t, err)
					assert.Contains(t, err.Error(), "is PAUSED")
					assert.Equal(t, readTime, took, "under PreflightFail the element waits for the read")
					assert.Zero(t, created)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, createTime, took, "the bundle ends when its create does, not when the read does")
				assert.Equal(t, 1, created)
				synctest.Wait()
				assert.Empty(t, logs.lines("is PAUSED"), "the read is still under way")
				assert.Zero(t, counters()[MetricQueuePreflightPaused])

				time.Sleep(readTime - took)
				synctest.Wait()
				assert.Len(t, logs.lines("is PAUSED"), 1, "the read logs its warning as it ends")
				assert.Zero(t, counters()[MetricQueuePreflightPaused], "counting needs a bundle")

				// The next bundle, however small, counts it, once.
				require.NoError(t, bundle())
				require.NoError(t, bundle(urlOrder{ID: "next"}))
				assert.Equal(t, int64(1), counters()[MetricQueuePreflightPaused])
				assert.Len(t, logs.lines("is PAUSED"), 1)
				assert.Equal(t, 1, reader.count())
			})
		})
	}
}
