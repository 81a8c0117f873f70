package cloudtasksio

import (
	"errors"
	"fmt"
	"reflect"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
)

var (
	queueType = reflect.TypeOf(Queue{})
	taskType  = reflect.TypeOf((*cloudtaskspb.Task)(nil))
	keyType   = reflect.TypeOf("")
)

// Write creates one Cloud Task per element of col, as cfg describes, and returns the dead
// letters: a PCollection of deadletter.FailedElement that holds elements only under the
// DeadLetter failure policy (each carrying its element's event time; "Dead letters and
// windows" in the package documentation says which window it lands in). A bad configuration
// panics at pipeline construction; use TryWrite to get the error instead.
func Write(s beam.Scope, cfg Config, col beam.PCollection) beam.PCollection {
	out, err := TryWrite(s, cfg, col)
	if err != nil {
		panic(err)
	}
	return out
}

// TryWrite is Write returning construction errors instead of panicking. Every error names the
// Config field (or element field) at fault.
func TryWrite(s beam.Scope, cfg Config, col beam.PCollection) (beam.PCollection, error) {
	out, err := tryWrite(s, cfg, col)
	return out, withPrefix(err)
}

// tryWrite is TryWrite without the package prefix on its errors.
func tryWrite(s beam.Scope, cfg Config, col beam.PCollection) (beam.PCollection, error) {
	if !col.IsValid() {
		return beam.PCollection{}, errors.New("the input PCollection is not valid")
	}
	if typex.IsKV(col.Type()) || typex.IsCoGBK(col.Type()) || col.Type().Type() == nil {
		return beam.PCollection{}, fmt.Errorf("Write takes a PCollection of single values, not %v", col.Type())
	}
	elem := col.Type().Type()
	spec, err := compile(cfg, elem)
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("cloudtasksio.Write")
	if spec.Delivery == ExactlyOnce {
		return writeExactlyOnce(s, spec, col)
	}
	out, err := beam.TryParDo(s, &writeFn{Spec: spec}, col)
	if err != nil {
		return beam.PCollection{}, err
	}
	return out[0], nil
}

// sinkSpec is the serializable form of a checked Config, shipped to workers inside the DoFn.
type sinkSpec struct {
	Queue      Queue
	QueueFn    *beam.EncodedFunc `json:",omitempty"`
	HTTP       *HTTPTarget       `json:",omitempty"`
	AppEngine  *AppEngineTarget  `json:",omitempty"`
	Serializer *beam.EncodedFunc `json:",omitempty"`
	TaskIDFn   *beam.EncodedFunc `json:",omitempty"`
	Delivery   DeliveryGuarantee
	Staged     StagedOptions
	Writer     WriterOptions
	OnFailure  FailurePolicy
	Client     clientSpec
	// Elem is the input element type, whose Beam coder encodes a dead letter's Element.
	Elem *beam.EncodedType `json:",omitempty"`
}

// compile checks cfg and returns its serializable form: first every rule that needs no
// element (Config.validate), then the user functions' signatures and the task builder against
// the element type, so a bad configuration fails at pipeline construction and not on a
// worker. Its errors have no package prefix; TryWrite adds it.
func compile(cfg Config, elem reflect.Type) (*sinkSpec, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	spec := &sinkSpec{Queue: cfg.Queue, HTTP: cfg.HTTP, AppEngine: cfg.AppEngine, Delivery: cfg.Delivery, OnFailure: cfg.OnFailure,
		Elem: &beam.EncodedType{T: elem}}
	var err error
	for _, f := range []struct {
		field string
		fn    any
		ret   reflect.Type
		dst   **beam.EncodedFunc
	}{
		{"QueueFn", cfg.QueueFn, queueType, &spec.QueueFn},
		{"Serializer", cfg.Serializer, taskType, &spec.Serializer},
		{"TaskIDFn", cfg.TaskIDFn, keyType, &spec.TaskIDFn},
	} {
		if f.fn == nil {
			continue
		}
		if *f.dst, err = encodeUserFunc(f.field, f.fn, elem, f.ret); err != nil {
			return nil, err
		}
	}
	// validate has accepted these; resolving them cannot fail.
	spec.Writer, _ = cfg.Writer.resolve()
	spec.Staged, _ = cfg.staged()
	settings, _ := cfg.clientSettings()
	spec.Client = clientSpec{EmulatorEndpoint: cfg.EmulatorEndpoint, ServiceAccountKeyFile: cfg.ServiceAccountKeyFile,
		ChannelPoolSize: spec.Writer.ChannelPoolSize, Settings: settings}

	// Building the task builder once here runs every target and format check on the driver.
	if _, err := newTaskBuilder(spec, elem); err != nil {
		return nil, err
	}
	return spec, nil
}
