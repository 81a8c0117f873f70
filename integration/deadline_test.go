package integration

import (
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

func init() {
	beam.RegisterType(reflect.TypeOf(deadlineItem{}))
}

// deadlineItem carries its own dispatch deadline; zero keeps the target's.
type deadlineItem struct {
	ID       string        `json:"id"`
	Deadline time.Duration `cloudtasks:"dispatch-deadline"`
}

// TestDispatchDeadlinesReachTheStoredTasksOnPrism writes to an HTTP and an App Engine target
// whose fixed deadlines come from the option keys, with elements that keep them, override them
// within the family's bounds, or (one HTTP element) lie outside them and reach the failure
// policy instead of the service.
func TestDispatchDeadlinesReachTheStoredTasksOnPrism(t *testing.T) {
	needsCloudtaskstest(t, "WithoutDispatch and stored tasks")
	b := newBackend(t, cloudtaskstest.WithoutDispatch())
	httpQ, aeQ := b.newQueue(t, nil), b.newQueue(t, nil)
	configFor := func(q cloudtasksio.Queue, options map[string]string) cloudtasksio.Config {
		opts := map[string]string{"project": q.Project, "location": q.Location, "queue": q.Name,
			"emulator-endpoint": b.Addr, "format": "json"}
		for k, v := range options {
			opts[k] = v
		}
		cfg, err := cloudtasksio.ConfigFromOptions(opts)
		require.NoError(t, err)
		cfg.OnFailure = cloudtasksio.LogAndDrop
		return cfg
	}
	httpCfg := configFor(httpQ, map[string]string{"http.url": fmtURL, "http.dispatch-deadline": "1m"})
	aeCfg := configFor(aeQ, map[string]string{"target.type": "app-engine", "app-engine.relative-uri": "/tasks",
		"app-engine.dispatch-deadline": "2h"})

	counters := runWrites(t, func(s beam.Scope) {
		cloudtasksio.Write(s, httpCfg, beam.Create(s, deadlineItem{ID: "fixed"}, deadlineItem{ID: "own", Deadline: 20 * time.Minute},
			deadlineItem{ID: "too-long", Deadline: 31 * time.Minute}))
	}, func(s beam.Scope) {
		cloudtasksio.Write(s, aeCfg, beam.Create(s, deadlineItem{ID: "fixed"}, deadlineItem{ID: "own", Deadline: 20 * time.Hour}))
	})
	assert.Equal(t, int64(4), counters[cloudtasksio.MetricRecordsSend])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSendErrors], "31m is beyond the HTTP bound: that element goes to the failure policy")

	deadlines := func(q cloudtasksio.Queue, body func(task *cloudtaskspb.Task) []byte) map[string]time.Duration {
		out := map[string]time.Duration{}
		for _, task := range b.Server.Tasks(q.Path()) {
			out[string(body(task))] = task.GetDispatchDeadline().AsDuration()
		}
		return out
	}
	assert.Equal(t, map[string]time.Duration{`{"id":"fixed"}`: time.Minute, `{"id":"own"}`: 20 * time.Minute},
		deadlines(httpQ, func(task *cloudtaskspb.Task) []byte { return task.GetHttpRequest().GetBody() }))
	assert.Equal(t, map[string]time.Duration{`{"id":"fixed"}`: 2 * time.Hour, `{"id":"own"}`: 20 * time.Hour},
		deadlines(aeQ, func(task *cloudtaskspb.Task) []byte { return task.GetAppEngineHttpRequest().GetBody() }),
		"App Engine deadlines may pass the HTTP 30m bound")
}
