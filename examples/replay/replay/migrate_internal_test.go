package replay

import (
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// migratedOrder is an element type whose fields changed after dead letters were published:
// it gained Priority. migratedOrderV1 is its old definition, kept under another name to
// decode those dead letters.
type (
	migratedOrder struct {
		ID       string `json:"id" cloudtasks:"task-id"`
		Items    int    `json:"items"`
		Priority string `json:"priority"`
	}
	migratedOrderV1 struct {
		ID    string `json:"id"`
		Items int    `json:"items"`
	}
)

func init() {
	beam.RegisterType(reflect.TypeFor[migratedOrder]())
	beam.RegisterType(reflect.TypeFor[migratedOrderV1]())
	register.Function2x2(migrateOrder)
}

// migrateOrder is the migration's fix function: the old order, converted.
func migrateOrder(_ deadletter.FailedElement, o migratedOrderV1) (migratedOrder, bool) {
	return migratedOrder{ID: o.ID, Items: o.Items, Priority: "normal"}, true
}

// oldDeadLetter is a dead letter published before migratedOrder gained a field: its element
// has the old fields, its ElementType the type's name, which did not change.
func oldDeadLetter(t *testing.T, o migratedOrderV1) pulled {
	t.Helper()
	elem, _, err := deadletter.EncodeElement(o)
	require.NoError(t, err)
	return pulled{AckID: "ack-" + o.ID, DeadLetter: deadletter.FailedElement{Connector: cloudtasksio.Connector, Code: "INVALID_ARGUMENT",
		Element: elem, ElementType: deadletter.ElementTypeName(reflect.TypeFor[migratedOrder]())}}
}

// Changing the element type's fields makes the dead letters already published undecodable by
// the new type. The migration decodes them with the old definition (Options.ElementType says
// which name they carry), converts them in Fix, and writes the new type.
func TestAReplayMigratesDeadLettersOfAnElementTypeWhoseFieldsChanged(t *testing.T) {
	p := oldDeadLetter(t, migratedOrderV1{ID: "42", Items: 3})
	_, err := deadletter.DecodeElement[migratedOrder](p.DeadLetter)
	require.Error(t, err, "the new type cannot read the old fields")
	assert.Contains(t, err.Error(), "do not decode as")

	opts := Options{Subscription: testSub, ElementType: p.DeadLetter.ElementType, Fix: migrateOrder,
		Write: cloudtasksio.Config{Queue: cloudtasksio.Queue{Project: "p", Location: "l", Name: "q"},
			HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}}}
	_, s := beam.NewPipelineWithRoot()
	require.NoError(t, Build(s, opts, reflect.TypeFor[migratedOrderV1]()), "Fix may convert the old type to the Write's")

	fix, out, err := checkFix(migrateOrder, reflect.TypeFor[migratedOrderV1]())
	require.NoError(t, err)
	assert.Equal(t, reflect.TypeFor[migratedOrder](), out)
	f := &fixFn{Elem: beam.EncodedType{T: reflect.TypeFor[migratedOrderV1]()}, ElementType: opts.ElementType, Fix: fix}
	f.Setup()
	ctx, counters := metricsContext()
	var kept []any
	var acked []string
	emit := func(_ beam.EventTime, x beam.X) { kept = append(kept, x) }
	ack := func(a pendingAck) { acked = append(acked, a.AckID) }
	f.StartBundle(ctx, emit, ack)
	f.ProcessElement(ctx, 0, p, emit, ack)
	newer := pulledString(t, "a dead letter of another type") // not the name the migration reads
	f.ProcessElement(ctx, 0, newer, emit, ack)
	f.FinishBundle(ctx, emit, ack)
	assert.Equal(t, []any{migratedOrder{ID: "42", Items: 3, Priority: "normal"}}, kept)
	assert.Equal(t, []string{"ack-42"}, acked)
	assert.Equal(t, map[string]int64{MetricReplayed: 1, MetricNotReplayable: 1}, counters())
}
