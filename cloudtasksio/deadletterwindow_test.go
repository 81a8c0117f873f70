package cloudtasksio_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func init() {
	register.Function2x0(stampOrder)
	register.Emitter2[beam.EventTime, order]()
	register.Function3x1(describeWindowedDeadLetter)
}

// stampOrder gives each order the event time of its Amount in seconds.
func stampOrder(o order, emit func(beam.EventTime, order)) {
	emit(beam.EventTime(int64(o.Amount)*1000), o)
}

// describeWindowedDeadLetter says a dead letter's code, event time (ms) and window.
func describeWindowedDeadLetter(w beam.Window, et beam.EventTime, fe deadletter.FailedElement) string {
	where := fmt.Sprintf("%v", w)
	if iw, ok := w.(window.IntervalWindow); ok {
		where = fmt.Sprintf("[%d,%d)", int64(iw.Start), int64(iw.End))
	} else if w.Equals(window.GlobalWindow{}) {
		where = "global"
	}
	return fmt.Sprintf("%s %d %s", fe.Code, int64(et), where)
}

// The package documentation's "Dead letters and windows": every dead letter keeps its
// element's event time; a failure found while building the task is emitted in the element's
// own window, and a Cloud Tasks rejection collected as the bundle finishes lands in the global
// window. Here the rejected order is the only one sent, so nothing but FinishBundle can collect
// its answer.
func TestDeadLettersKeepTheEventTimeAndLandInTheDocumentedWindow(t *testing.T) {
	srv := newServer(t)
	rejectMarked(srv)
	cfg := httpConfig(srv)
	cfg.TaskIDFn = keyOfOrder
	cfg.OnFailure = cloudtasksio.DeadLetter
	source := func(s beam.Scope) beam.PCollection {
		in := beam.Create(s, order{ID: "nokey", Amount: 90}, order{ID: "x2", Amount: 30})
		return beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, stampOrder, in))
	}
	_, err := runFrom(t, cfg, source, func(s beam.Scope, dl beam.PCollection) {
		described := beam.ParDo(s, describeWindowedDeadLetter, dl)
		passert.Equals(s, beam.WindowInto(s, window.NewGlobalWindows(), described),
			cloudtasksio.CodeTaskID+" 90000 [60000,120000)",  // built in ProcessElement: its own window
			cloudtasksio.CodeInvalidArgument+" 30000 global") // collected in FinishBundle: the global window
	})
	require.NoError(t, err)
}
