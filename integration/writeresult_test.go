package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	register.Function1x1(describeCreated)
	register.Function2x1(doneAfter)
}

// describeCreated renders a created task as "<key> <name> duplicate=<bool> created=<bool>",
// created saying whether it has a create time. A task without a key shows whether its name,
// which the service chose, is a task name of its queue.
func describeCreated(c cloudtasksio.CreatedTask) string {
	name := c.Name
	if c.Key == "" {
		id, found := strings.CutPrefix(c.Name, c.Queue+"/tasks/")
		name = fmt.Sprintf("service-named=%v", found && id != "")
	}
	return fmt.Sprintf("%s %s duplicate=%v created=%v", c.Key, name, c.Duplicate, !c.CreateTime.IsZero())
}

// doneAfter is the step a pipeline runs once its tasks are created: it takes their count as a
// side input, so the runner runs it only when the write step has emitted every created task.
func doneAfter(_ []byte, created int) string { return fmt.Sprintf("done after %d tasks", created) }

// writeWithResult adds WriteWithResult over elems, asserts its created tasks render as want
// (describeCreated) and that a step waiting on them runs after all of them, and runs it.
func writeWithResult(t *testing.T, cfg cloudtasksio.Config, elems []any, want ...any) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	res := cloudtasksio.WriteWithResult(s, cfg, beam.Create(s, elems...))
	passert.Equals(s, beam.ParDo(s, describeCreated, res.Created), want...)
	passert.Empty(s, res.DeadLetters)
	done := beam.ParDo(s, doneAfter, beam.Impulse(s), beam.SideInput{Input: stats.CountElms(s, res.Created)})
	passert.Equals(s, done, fmt.Sprintf("done after %d tasks", len(want)))
	require.NoError(t, ptest.Run(p))
}

func TestWriteWithResultListsTheCreatedTasksAndTheirDuplicatesOnARerun(t *testing.T) {
	rec := newRecorder(t)
	b := newBackend(t)
	q := b.newQueue(t, nil)
	cfg := cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr,
		HTTP: &cloudtasksio.HTTPTarget{URL: rec.URL + "/orders", Body: formats.JSON()}}
	named := []any{keyedItem{ID: "a", Key: "key-a"}, keyedItem{ID: "b", Key: "key-b"}}
	nameOf := func(key string) string { return q.Path() + "/tasks/" + cloudtasksio.TaskID(key) }

	writeWithResult(t, cfg, named,
		"key-a "+nameOf("key-a")+" duplicate=false created=true",
		"key-b "+nameOf("key-b")+" duplicate=false created=true")
	// A rerun of the same elements creates nothing, and still lists every task.
	writeWithResult(t, cfg, named,
		"key-a "+nameOf("key-a")+" duplicate=true created=false",
		"key-b "+nameOf("key-b")+" duplicate=true created=false")
	// Unnamed tasks are listed with the names the service gave them.
	writeWithResult(t, cfg, []any{dispatchItem{ID: "c", Qty: 1}, dispatchItem{ID: "d", Qty: 2}},
		" service-named=true duplicate=false created=true",
		" service-named=true duplicate=false created=true")
	assert.Len(t, rec.waitFor(t, b, 4), 4, "four tasks, none twice")
}

func TestWriteWithResultInExactlyOnceModeListsTheSameTasks(t *testing.T) {
	rec := newRecorder(t)
	b := newBackend(t)
	q := b.newQueue(t, nil)
	cfg := cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr, Delivery: cloudtasksio.ExactlyOnce,
		HTTP: &cloudtasksio.HTTPTarget{URL: rec.URL + "/orders", Body: formats.JSON()}}
	named := []any{keyedItem{ID: "a", Key: "key-a"}, keyedItem{ID: "b", Key: "key-b"}}
	nameOf := func(key string) string { return q.Path() + "/tasks/" + cloudtasksio.TaskID(key) }

	writeWithResult(t, cfg, named,
		"key-a "+nameOf("key-a")+" duplicate=false created=true",
		"key-b "+nameOf("key-b")+" duplicate=false created=true")
	writeWithResult(t, cfg, named,
		"key-a "+nameOf("key-a")+" duplicate=true created=false",
		"key-b "+nameOf("key-b")+" duplicate=true created=false")
	assert.Len(t, rec.waitFor(t, b, 2), 2, "two tasks, none twice")
}
