package cloudtasksio

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/jsonx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
)

func TestTheCreateBaseAddsNothingToTheSerializedDoFns(t *testing.T) {
	// Beam ships a DoFn as the JSON of its exported fields, an embedded struct's included: the
	// engine, the metrics and the bundle's failure must stay on the worker that made them.
	created := engine.CreatorFunc(func(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
		return req.GetTask(), nil
	})
	spec, err := compile(Config{Queue: Queue{Project: "p", Location: "l", Name: "q"}, HTTP: &HTTPTarget{URL: "https://example.com/orders"},
		EmulatorEndpoint: "127.0.0.1:1"}, typeOf(eoOrder{}))
	require.NoError(t, err)
	write := &writeFn{Spec: spec}
	require.NoError(t, write.Setup())
	write.start(created, engineOptions(write.Spec.Writer), write)
	staged := &stagedCreateFn{Spec: eoSpec(t, "q", eoOrder{}, DefaultStagedOptions())}
	require.NoError(t, staged.Setup())
	staged.start(created, engineOptions(staged.Spec.Writer), staged)
	for name, fn := range map[string]any{"write": write, "staged create": staged} {
		data, err := jsonx.Marshal(fn)
		require.NoError(t, err, name)
		var fields map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(data, &fields), name)
		assert.Equal(t, []string{"Spec"}, slices.Sorted(maps.Keys(fields)), name)
	}
}
