package cloudtasksio

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

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
// windows" in the package documentation says which window it lands in). A bad configuration panics at pipeline construction; use TryWrite to get
// the error instead.
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
	if !col.IsValid() {
		return beam.PCollection{}, errors.New("cloudtasksio: the input PCollection is not valid")
	}
	if typex.IsKV(col.Type()) || typex.IsCoGBK(col.Type()) || col.Type().Type() == nil {
		return beam.PCollection{}, fmt.Errorf("cloudtasksio: Write takes a PCollection of single values, not %v", col.Type())
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
		return beam.PCollection{}, fmt.Errorf("cloudtasksio: %w", err)
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
}

// compile checks cfg against the element type and returns its serializable form. Every rule
// that can be checked without an element is checked here, so a bad configuration fails at
// pipeline construction and not on a worker.
func compile(cfg Config, elem reflect.Type) (*sinkSpec, error) {
	spec := &sinkSpec{Queue: cfg.Queue, HTTP: cfg.HTTP, AppEngine: cfg.AppEngine, Delivery: cfg.Delivery, OnFailure: cfg.OnFailure}
	var err error

	switch {
	case cfg.QueueFn != nil && !cfg.Queue.IsZero():
		return nil, errors.New("cloudtasksio: Config.Queue and Config.QueueFn are both set; set exactly one destination")
	case cfg.QueueFn != nil:
		if spec.QueueFn, err = encodeUserFunc("QueueFn", cfg.QueueFn, elem, queueType); err != nil {
			return nil, err
		}
	case cfg.Queue.IsZero():
		return nil, errors.New("cloudtasksio: no destination: set Config.Queue or Config.QueueFn")
	default:
		if err := cfg.Queue.validate(); err != nil {
			return nil, fmt.Errorf("cloudtasksio: Config.Queue: %w", err)
		}
	}

	targets := 0
	for _, set := range []bool{cfg.HTTP != nil, cfg.AppEngine != nil, cfg.Serializer != nil} {
		if set {
			targets++
		}
	}
	if targets != 1 {
		return nil, fmt.Errorf("cloudtasksio: %d ways to build the task are set; set exactly one of Config.HTTP, Config.AppEngine and Config.Serializer", targets)
	}
	if cfg.Serializer != nil {
		if spec.Serializer, err = encodeUserFunc("Serializer", cfg.Serializer, elem, taskType); err != nil {
			return nil, err
		}
	}
	if cfg.TaskIDFn != nil {
		if spec.TaskIDFn, err = encodeUserFunc("TaskIDFn", cfg.TaskIDFn, elem, keyType); err != nil {
			return nil, err
		}
	}

	if spec.Writer, err = cfg.Writer.resolve(); err != nil {
		return nil, err
	}
	if cfg.OnFailure < FailBundle || cfg.OnFailure > DeadLetter {
		return nil, fmt.Errorf("cloudtasksio: Config.OnFailure %v is not FailBundle, LogAndDrop or DeadLetter", cfg.OnFailure)
	}
	if err := compileDelivery(cfg, spec); err != nil {
		return nil, err
	}

	spec.Client = clientSpec{EmulatorEndpoint: cfg.EmulatorEndpoint, ServiceAccountKeyFile: cfg.ServiceAccountKeyFile, ChannelPoolSize: spec.Writer.ChannelPoolSize}
	if cfg.EmulatorEndpoint != "" {
		if err := checkEndpoint("Config.EmulatorEndpoint", cfg.EmulatorEndpoint); err != nil {
			return nil, err
		}
		if cfg.ServiceAccountKeyFile != "" {
			return nil, errors.New("cloudtasksio: Config.ServiceAccountKeyFile cannot be used with Config.EmulatorEndpoint, whose plaintext connection carries no credentials")
		}
		if cfg.Writer.ChannelPoolSize != 0 {
			return nil, errors.New("cloudtasksio: WriterOptions.ChannelPoolSize cannot be used with Config.EmulatorEndpoint, which always uses one plaintext connection")
		}
	}
	if cfg.ServiceAccountKeyFile != "" && strings.TrimSpace(cfg.ServiceAccountKeyFile) == "" {
		return nil, errors.New("cloudtasksio: Config.ServiceAccountKeyFile is blank")
	}
	if spec.Client.Settings, err = compileClient(cfg); err != nil {
		return nil, err
	}

	// Building the task builder once here runs every target and format check on the driver.
	if _, err := newTaskBuilder(spec, elem); err != nil {
		return nil, err
	}
	return spec, nil
}
