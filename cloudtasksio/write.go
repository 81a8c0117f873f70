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
	out, err := tryWrite(s, cfg, col, false)
	return out.DeadLetters, withPrefix(err)
}

// tryWrite is TryWrite without the package prefix on its errors. With created, the sink's
// DoFns are those that also emit a CreatedTask per created task (WriteWithResult); without,
// Created is left unset and nothing builds a CreatedTask.
func tryWrite(s beam.Scope, cfg Config, col beam.PCollection, created bool) (WriteResult, error) {
	if !col.IsValid() {
		return WriteResult{}, errors.New("the input PCollection is not valid")
	}
	if typex.IsKV(col.Type()) || typex.IsCoGBK(col.Type()) || col.Type().Type() == nil {
		return WriteResult{}, fmt.Errorf("Write takes a PCollection of single values, not %v", col.Type())
	}
	elem := col.Type().Type()
	spec, err := compile(cfg, elem)
	if err != nil {
		return WriteResult{}, err
	}
	s = s.Scope("cloudtasksio.Write")
	if spec.Delivery == ExactlyOnce {
		return writeExactlyOnce(s, spec, col, created)
	}
	var fn any = &writeFn{Spec: spec}
	if created {
		fn = &writeResultFn{writeFn{Spec: spec}}
	}
	out, err := beam.TryParDo(s, fn, col)
	if err != nil {
		return WriteResult{}, err
	}
	return writeResult(out, created), nil
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
	// OnDestinationFailure is left out of the JSON when it is the default.
	OnDestinationFailure DestinationFailurePolicy `json:",omitempty"`
	Client               clientSpec
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
	if err := cfg.checkDestinationPolicy(); err != nil {
		return nil, err
	}
	spec := &sinkSpec{Queue: cfg.Queue, HTTP: cfg.HTTP, AppEngine: cfg.AppEngine, Delivery: cfg.Delivery, OnFailure: cfg.OnFailure,
		OnDestinationFailure: cfg.OnDestinationFailure, Elem: &beam.EncodedType{T: elem}}
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

// checkOnWorker is the one check a DoFn of the sink makes of its spec, in Setup: writeFn (step
// AtLeastOnce), and stageFn and stagedCreateFn (step ExactlyOnce) all call it. The spec a
// worker decodes is not necessarily the one TryWrite checked: it travels as JSON inside the
// pipeline, which a template, another tool or a corrupt graph may have changed. The check
// applies the rules TryWrite applied (Config.validate, so a rule fails with the same error on
// the worker as at construction), refuses a spec of the other delivery mode, and resolves the
// writer options to the values the engine needs. The element-type rules run again on the
// worker when the first element of a type arrives (elementBuilders). Errors carry no package
// prefix; the DoFn method that returns them adds it.
func (s *sinkSpec) checkOnWorker(step DeliveryGuarantee) error {
	if s == nil {
		return errors.New("the DoFn carries no sink spec: its serialized form lost it")
	}
	for _, f := range []struct {
		field string
		fn    *beam.EncodedFunc
	}{{"QueueFn", s.QueueFn}, {"Serializer", s.Serializer}, {"TaskIDFn", s.TaskIDFn}} {
		if f.fn != nil && f.fn.Fn == nil {
			return fmt.Errorf("the sink spec has Config.%s without its function", f.field)
		}
	}
	if err := s.config().validate(); err != nil {
		return err
	}
	if s.Delivery != step {
		return fmt.Errorf("the sink spec says Config.Delivery %v, but this DoFn is a step of %v delivery", s.Delivery, step)
	}
	// validate has accepted them. A spec from compile holds them resolved already, and is not
	// written to: DoFns that share one spec (an in-process runner) may set up at once.
	if w, _ := s.Writer.resolve(); w != s.Writer {
		s.Writer = w
	}
	return nil
}

// config returns a Config that compile turns into s, as far as Config.validate reads it: the
// user functions are there or not, and the client settings are ClientOptions again.
func (s *sinkSpec) config() Config {
	settings := s.Client.Settings
	c := Config{Queue: s.Queue, HTTP: s.HTTP, AppEngine: s.AppEngine, Delivery: s.Delivery, Writer: s.Writer, OnFailure: s.OnFailure,
		OnDestinationFailure: s.OnDestinationFailure, EmulatorEndpoint: s.Client.EmulatorEndpoint, ServiceAccountKeyFile: s.Client.ServiceAccountKeyFile,
		Client: ClientOptions{Endpoint: settings.Endpoint, QuotaProject: settings.QuotaProject,
			ImpersonateServiceAccount: settings.ImpersonateServiceAccount, ImpersonateDelegates: settings.Delegates(),
			UniverseDomain: settings.UniverseDomain, Telemetry: TelemetryOn}}
	if settings.DisableTelemetry {
		c.Client.Telemetry = TelemetryOff
	}
	// A nil *beam.EncodedFunc must stay a nil any: validate tells the functions set by != nil.
	if s.QueueFn != nil {
		c.QueueFn = s.QueueFn
	}
	if s.Serializer != nil {
		c.Serializer = s.Serializer
	}
	if s.TaskIDFn != nil {
		c.TaskIDFn = s.TaskIDFn
	}
	if s.Delivery == ExactlyOnce || s.Staged != (StagedOptions{}) {
		staged := s.Staged
		c.Staged = &staged
	}
	return c
}
