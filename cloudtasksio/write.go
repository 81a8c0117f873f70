package cloudtasksio

import (
	"errors"
	"fmt"
	"reflect"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
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

// sinkSpec is the serializable form of a checked Config, shipped to workers inside the DoFn as
// JSON. It is the Config itself, so a field added to Config reaches the worker without an edit
// here: only the user functions change form, since a func cannot travel as JSON. sinkSpec's own
// QueueFn, Serializer and TaskIDFn hide the Config's from Go and from JSON; the Config's are nil.
// TestSpecCarriesEveryConfigField sets every Config field and checks that config gives it back.
type sinkSpec struct {
	Config
	QueueFn    *beam.EncodedFunc `json:",omitempty"`
	Serializer *beam.EncodedFunc `json:",omitempty"`
	TaskIDFn   *beam.EncodedFunc `json:",omitempty"`
	// Elem is the input element type, whose Beam coder encodes a dead letter's Element.
	Elem *beam.EncodedType `json:",omitempty"`

	// client selects the worker's Cloud Tasks client. resolve derives it from the Config's
	// client settings; it is not shipped, so a worker derives it from what the user set.
	client clientSpec
}

func init() {
	// Beam's schema registry walks the field types of every registered DoFn at beam.Init and
	// refuses the `any` fields of the Config inside a sinkSpec. A spec never becomes a schema
	// row (Beam ships a DoFn as JSON), so declaring it a logical type stored as bytes stops
	// the walk there.
	schema.RegisterLogicalType(schema.ToLogicalType("beam-cloudtasks:sink-spec", reflect.TypeFor[sinkSpec](), reflect.TypeFor[[]byte]()))
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
	spec := &sinkSpec{Config: cfg, Elem: &beam.EncodedType{T: elem}}
	spec.Config.QueueFn, spec.Config.Serializer, spec.Config.TaskIDFn = nil, nil, nil
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
	spec.resolve()

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
// the worker as at construction), refuses a spec of the other delivery mode, and resolves what
// the DoFns read (resolve). The element-type rules run again on the
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
	s.resolve()
	return nil
}

// resolve sets what the DoFns read of s in the form they need: the writer options with their
// defaults, the staged options under exactly-once (the defaults for a nil Staged) and the
// client selection. validate must have accepted s.config(). It writes only what differs: DoFns
// that share one spec from compile (an in-process runner) may set up at once.
func (s *sinkSpec) resolve() {
	if w, _ := s.Writer.resolve(); w != s.Writer {
		s.Writer = w
	}
	if s.Delivery == ExactlyOnce {
		if staged, _ := s.staged(); s.Staged == nil || *s.Staged != staged {
			s.Staged = &staged
		}
	}
	if client := s.clientSpec(); client != s.client {
		s.client = client
	}
}

// config returns the Config that compile turned into s, but for the defaults resolve filled
// in: the user functions are their encoded forms.
func (s *sinkSpec) config() Config {
	c := s.Config
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
	return c
}
