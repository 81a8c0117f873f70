package avro

import (
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

func FuzzAvroRoundTrip(f *testing.F) {
	f.Add("A1", int32(-3), int64(300), "hi", true, "x")
	f.Add("", int32(0), int64(-1<<63), "", false, "")
	enc, err := bodyformat.NewEncoder(formats.Avro(orderSchema), schemaOf[avroOrder](f))
	require.NoError(f, err)
	sch, err := hamba.Parse(orderSchema)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, id string, qty int32, total int64, note string, hasNote bool, tag string) {
		elem := avroOrder{ID: id, Qty: qty, Total: total, Tags: []string{tag, tag}, Paid: hasNote}
		if hasNote {
			elem.Note = &note
		}
		body, err := enc.Encode(elem)
		require.NoError(t, err)
		var back struct {
			ID    string   `avro:"id"`
			Qty   int32    `avro:"qty"`
			Total int64    `avro:"total"`
			Note  *string  `avro:"note"`
			Tags  []string `avro:"tags"`
			Paid  bool     `avro:"paid"`
		}
		require.NoError(t, hamba.Unmarshal(sch, body, &back))
		require.Equal(t, elem.ID, back.ID)
		require.Equal(t, elem.Qty, back.Qty)
		require.Equal(t, elem.Total, back.Total)
		require.Equal(t, elem.Note, back.Note)
		require.Equal(t, elem.Tags, back.Tags)
		require.Equal(t, elem.Paid, back.Paid)
	})
}
