package cloudtasksio_test

import (
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func init() { register.Function1x1(describeFailedOrder) }

// describeFailedOrder renders a dead letter as "CODE id amount" from the order it carries, or
// "CODE <error>" when it carries none.
func describeFailedOrder(fe deadletter.FailedElement) string {
	o, err := deadletter.DecodeElement[order](fe)
	if err != nil {
		return fe.Code + " <" + err.Error() + ">"
	}
	return fmt.Sprintf("%s %s %d %s", fe.Code, o.ID, o.Amount, fe.ElementType)
}

// TestEveryDeadLetterCarriesItsElement checks that each kind of dead letter carries the order
// it came from, also after the dead letters crossed a Reshuffle (encoded with the Beam coder
// of FailedElement): SERIALIZATION (no task was built), TASK_ID and INVALID_ARGUMENT (answered
// by the server after the element was handed to the writer).
func TestEveryDeadLetterCarriesItsElement(t *testing.T) {
	srv := newServer(t)
	srv.SetRejectFunc(func(req *cloudtaskspb.CreateTaskRequest) error {
		if strings.HasPrefix(string(req.GetTask().GetHttpRequest().GetBody()), "x") {
			return fmt.Errorf("rejected by test")
		}
		return nil
	})
	cfg := cloudtasksio.Config{Queue: testQueue, Serializer: serializeOrder, TaskIDFn: keyOfOrder,
		EmulatorEndpoint: srv.Addr, OnFailure: cloudtasksio.DeadLetter, Writer: fastRetries}
	const typeName = "github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio_test.order"
	elems := []any{
		order{ID: "1", Amount: 1},     // created
		order{ID: "3", Amount: -1},    // SERIALIZATION
		order{ID: "nokey", Amount: 5}, // TASK_ID
		order{ID: "x7", Amount: 7},    // INVALID_ARGUMENT from the server
	}
	counters, err := run(t, cfg, elems, func(s beam.Scope, dl beam.PCollection) {
		passert.Equals(s, beam.ParDo(s, describeFailedOrder, beam.Reshuffle(s, dl)),
			"SERIALIZATION 3 -1 "+typeName,
			"TASK_ID nokey 5 "+typeName,
			"INVALID_ARGUMENT x7 7 "+typeName)
	})
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 1)
	assert.Equal(t, int64(3), counters[cloudtasksio.MetricRecordsSendErrors])
	assert.Zero(t, counters[cloudtasksio.MetricDeadLetterElementsNotEncoded])
}
