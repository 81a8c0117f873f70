package cloudtasksio_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// TestWriteCreatesEveryElementOnceUnderRefusals runs Write on prism, with its default
// WriterOptions (adaptive concurrency on), while the server refuses creates in ways that do
// not follow the rate: 2% of them at random, or the first 40 in a row. The job succeeds (on
// prism a failed bundle fails the job) and every element becomes exactly one task.
func TestWriteCreatesEveryElementOnceUnderRefusals(t *testing.T) {
	for _, c := range []struct {
		name     string
		elements int
		refuse   func() cloudtaskstest.Reactor
	}{
		{"2% at random", 1000, func() cloudtaskstest.Reactor { return cloudtaskstest.RefuseAtRandom(0.02, 43) }},
		{"a burst of 40", 300, func() cloudtaskstest.Reactor { return cloudtaskstest.RefuseBurst(40, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t)
			srv.AddReactor("CreateTask", c.refuse())
			cfg := httpConfig(srv)
			cfg.Writer = cloudtasksio.WriterOptions{}
			_, err := run(t, cfg, orders(c.elements))
			require.NoError(t, err)

			st := srv.Stats()
			assert.Equal(t, c.elements, st.TasksCreated)
			assert.Equal(t, c.elements+st.InjectedErrors, st.CreateTaskCalls, "every refused create was tried again, and only those")
			assert.Positive(t, st.InjectedErrors, "the server refused creates")
			seen := map[string]int{}
			for _, task := range srv.Tasks(testQueue.Path()) {
				var o order
				require.NoError(t, json.Unmarshal(task.GetHttpRequest().GetBody(), &o))
				seen[o.ID]++
			}
			assert.Len(t, seen, c.elements, "every element has a task")
			for id, n := range seen {
				if n != 1 {
					t.Errorf("element %s has %d tasks", id, n)
				}
			}
		})
	}
}
