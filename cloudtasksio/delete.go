package cloudtasksio

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

// DeleteConfig describes one Delete: the queue that holds the tasks, the key each element's task
// was named from, and how the deletes are sent, retried and reported. It shares Config's names
// and meanings wherever they apply, so that a Delete reaches the tasks a Write named.
//
// Exactly one destination (Queue or QueueFn) must be set. Everything else has a working
// default.
type DeleteConfig struct {
	// Queue is the fixed queue whose tasks are deleted.
	Queue Queue
	// QueueFn resolves the queue per element: a top-level func(T) (Queue, error) registered
	// with the Beam register package, as Config.QueueFn. An error, or an invalid Queue, fails
	// the bundle.
	QueueFn any

	// TaskIDFn gives the key the element's task was named from: a top-level
	// func(T) (string, error) registered with the Beam register package, as Config.TaskIDFn.
	// The task deleted is TaskID(key) in the element's queue, the task Write created for the
	// same key. Nil reads the key as Write does without a TaskIDFn: from the element type's
	// `cloudtasks:"task-id"` field, so that a Delete of Write's own elements reaches their
	// tasks; or, for a PCollection of string, the elements are the keys. Any other element
	// type needs a TaskIDFn, which wins over the field when both are there. An error or an
	// empty key sends the element to the failure policy (CodeTaskID).
	TaskIDFn any

	// Writer tunes concurrency and retries as for Write; zero fields take their defaults. Its
	// in-flight bound, connection pool, retry budgets, attempt timeout, adaptive concurrency
	// and per-destination metrics apply to deletes. QueuePreflight and QueueHealthInterval
	// do not (a delete does not depend on how the queue dispatches) and must be left zero.
	Writer WriterOptions
	// OnFailure decides what happens to an element whose key cannot be read or whose delete
	// Cloud Tasks rejects as invalid. The default fails the bundle.
	OnFailure FailurePolicy
	// OnDestinationFailure decides what a failure of one queue does (NOT_FOUND about the queue
	// once its retry budget is spent, or a queue that a read proves missing; PERMISSION_DENIED;
	// FAILED_PRECONDITION), as Config.OnDestinationFailure does for Write. The default,
	// DestinationFailBundle, fails the bundle; DestinationIsolate sends that queue's elements
	// to OnFailure (which must then be LogAndDrop or DeadLetter) with the status as their code,
	// and deletes the other queues' tasks.
	OnDestinationFailure DestinationFailurePolicy

	// EmulatorEndpoint, ServiceAccountKeyFile and Client select the Cloud Tasks client as
	// Config's fields of the same names do; a Delete and a Write with the same settings share
	// one client per worker process.
	EmulatorEndpoint      string
	ServiceAccountKeyFile string
	Client                ClientOptions
}

// DeleteConnector is the deadletter.FailedElement.Connector of the dead letters Delete
// produces. It differs from Connector so that a consumer never takes a failed delete for a
// failed create: FailedTask refuses them, and the replay example leaves them. Their Payload is the
// DeleteTaskRequest in wire format (empty for CodeTaskID: no task was named), their
// Destination the queue path.
const DeleteConnector = "cloudtasks-delete"

// Delete deletes, for each element of col, the task Write created for the element's key in the
// element's queue (TaskID(key) under the queue path), and returns the dead letters: a
// PCollection of deadletter.FailedElement that holds elements only under the DeadLetter
// failure policy (Connector DeleteConnector, Code CodeTaskID or CodeInvalidArgument, or under
// DestinationIsolate the failed queue's code, the element's event time). A bad configuration panics at pipeline construction; use TryDelete to
// get the error instead.
//
// A task that is not there counts as done: Cloud Tasks answers NOT_FOUND about the task when it
// already ran, was deleted, or was never created, and the metric tasksAlreadyGone counts it
// apart from numRecordsDeleted. A NOT_FOUND about the queue is no such answer: it is retried on
// the NOT_FOUND budget and then fails the bundle, as for Write. Deletes are sent, bounded and
// retried as Write's creates are (WriterOptions), through the same client, and keep adaptive
// concurrency states of their own, apart from the creates' (DeleteTask is not a create).
//
// Cloud Tasks cannot change a task: delete it, and create the changed one under a new key (a
// key with a version). A deleted name stays taken for the queue's task-name retention, so a
// Write under the same key meanwhile is answered ALREADY_EXISTS and counted as deduplicated,
// without creating anything.
func Delete(s beam.Scope, cfg DeleteConfig, col beam.PCollection) beam.PCollection {
	out, err := TryDelete(s, cfg, col)
	if err != nil {
		panic(err)
	}
	return out
}

// TryDelete is Delete returning construction errors instead of panicking. Every error names
// the DeleteConfig field (or WriterOptions field) at fault.
func TryDelete(s beam.Scope, cfg DeleteConfig, col beam.PCollection) (beam.PCollection, error) {
	out, err := tryDelete(s, cfg, col)
	return out, withPrefix(err)
}

func tryDelete(s beam.Scope, cfg DeleteConfig, col beam.PCollection) (beam.PCollection, error) {
	if !col.IsValid() {
		return beam.PCollection{}, errors.New("the input PCollection is not valid")
	}
	if typex.IsKV(col.Type()) || typex.IsCoGBK(col.Type()) || col.Type().Type() == nil {
		return beam.PCollection{}, fmt.Errorf("Delete takes a PCollection of single values, not %v", col.Type())
	}
	spec, err := compileDelete(cfg, col.Type().Type())
	if err != nil {
		return beam.PCollection{}, err
	}
	out, err := beam.TryParDo(s.Scope("cloudtasksio.Delete"), &deleteFn{Spec: spec}, col)
	if err != nil {
		return beam.PCollection{}, err
	}
	return out[0], nil
}

// deleteSpec is the serializable form of a checked DeleteConfig, shipped to workers inside the
// DoFn.
type deleteSpec struct {
	Queue     Queue
	QueueFn   *beam.EncodedFunc `json:",omitempty"`
	TaskIDFn  *beam.EncodedFunc `json:",omitempty"`
	Writer    WriterOptions
	OnFailure FailurePolicy
	// OnDestinationFailure is DeleteConfig's.
	OnDestinationFailure DestinationFailurePolicy `json:",omitempty"`
	// The client settings as the user gave them: the worker derives its client from them.
	EmulatorEndpoint      string `json:",omitempty"`
	ServiceAccountKeyFile string `json:",omitempty"`
	Client                ClientOptions
	// Elem is the input element type, whose Beam coder encodes a dead letter's Element.
	Elem *beam.EncodedType `json:",omitempty"`

	// client selects the worker's Cloud Tasks client, derived from the settings above by
	// compileDelete and checkOnWorker; it is not shipped.
	client clientSpec
}

// compileDelete checks cfg against the element type and returns its serializable form. Its
// errors have no package prefix; TryDelete adds it.
func compileDelete(cfg DeleteConfig, elem reflect.Type) (*deleteSpec, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	spec := &deleteSpec{Queue: cfg.Queue, OnFailure: cfg.OnFailure, OnDestinationFailure: cfg.OnDestinationFailure, EmulatorEndpoint: cfg.EmulatorEndpoint,
		ServiceAccountKeyFile: cfg.ServiceAccountKeyFile, Client: cfg.Client, Elem: &beam.EncodedType{T: elem}}
	var err error
	if cfg.QueueFn != nil {
		if spec.QueueFn, err = encodeUserFunc("QueueFn", cfg.QueueFn, elem, queueType); err != nil {
			return nil, deleteFieldError(err)
		}
	}
	if cfg.TaskIDFn != nil {
		if spec.TaskIDFn, err = encodeUserFunc("TaskIDFn", cfg.TaskIDFn, elem, keyType); err != nil {
			return nil, deleteFieldError(err)
		}
	} else if _, err := taskIDSchema(elem); err != nil {
		return nil, err
	}
	// validate has accepted these; resolving them cannot fail.
	spec.Writer, _ = cfg.Writer.resolve()
	spec.client = cfg.config().clientSpec()
	return spec, nil
}

// taskIDSchema returns where Delete, without a TaskIDFn, reads the key of an element of type
// elem: nil for strings, which are the keys, or the schema of a struct whose
// `cloudtasks:"task-id"` field holds the key, the field Write names the element's task from. Any
// other type is an error naming DeleteConfig.TaskIDFn and the tag.
func taskIDSchema(elem reflect.Type) (*bodyformat.Schema, error) {
	if elem == keyType {
		return nil, nil
	}
	if _, tagged := cloudtasksTaggedField(elem); tagged {
		schema, err := bodyformat.NewSchema(elem)
		if err != nil {
			return nil, fmt.Errorf("DeleteConfig.TaskIDFn is not set and element type %v cannot give its %q field: %w", elem, bodyformat.KeyTaskID, err)
		}
		if schema.Has(bodyformat.KeyTaskID) {
			return schema, nil
		}
	}
	return nil, fmt.Errorf("DeleteConfig.TaskIDFn is not set, so the elements must be the keys (string) or carry them in a "+
		"`cloudtasks:%q` field, but they are %v; set DeleteConfig.TaskIDFn to a func(%v) (string, error) that returns the key, "+
		"or tag the key's field of %v `cloudtasks:%q`", bodyformat.KeyTaskID, elem, elem, elem, bodyformat.KeyTaskID)
}

// validate checks every rule of c that needs no element type, in a fixed order, and returns the
// first violation, naming the field as DeleteConfig (or WriterOptions) spells it. The rules are
// Config's for the fields the two share, so both refuse a value the same way.
func (c DeleteConfig) validate() error {
	switch {
	case c.QueueFn != nil && !c.Queue.IsZero():
		return errors.New("DeleteConfig.Queue and DeleteConfig.QueueFn are both set; set exactly one destination")
	case c.QueueFn == nil && c.Queue.IsZero():
		return errors.New("no destination: set DeleteConfig.Queue or DeleteConfig.QueueFn")
	case c.QueueFn == nil:
		if err := c.Queue.check(); err != nil {
			return deleteFieldError(err)
		}
	}
	if c.Writer.QueuePreflight != PreflightWarn {
		return fmt.Errorf("WriterOptions.QueuePreflight is %v; it does not apply to Delete, which reads no queue before deleting: leave it zero", c.Writer.QueuePreflight)
	}
	if c.Writer.QueueHealthInterval != 0 {
		return fmt.Errorf("WriterOptions.QueueHealthInterval is %v; it does not apply to Delete, which does not watch queues: leave it zero", c.Writer.QueueHealthInterval)
	}
	if c.OnFailure < FailBundle || c.OnFailure > DeadLetter {
		return fmt.Errorf("DeleteConfig.OnFailure %v is not FailBundle, LogAndDrop or DeadLetter", c.OnFailure)
	}
	if c.OnDestinationFailure < DestinationFailBundle || c.OnDestinationFailure > DestinationIsolate {
		return fmt.Errorf("DeleteConfig.OnDestinationFailure %v is not DestinationFailBundle or DestinationIsolate", c.OnDestinationFailure)
	}
	cfg := c.config()
	if err := cfg.checkDestinationPolicy(); err != nil {
		return deleteFieldError(err)
	}
	if _, err := cfg.Writer.resolve(); err != nil {
		return deleteFieldError(err)
	}
	if err := cfg.checkCredentials(); err != nil {
		return deleteFieldError(err)
	}
	if c.EmulatorEndpoint != "" && c.Writer.ChannelPoolSize != 0 {
		return errors.New("WriterOptions.ChannelPoolSize cannot be used with DeleteConfig.EmulatorEndpoint, which always uses one plaintext connection")
	}
	if _, err := cfg.clientSettings(); err != nil {
		return deleteFieldError(err)
	}
	return nil
}

// config returns the Config whose shared fields are c's, for the rules the two share.
func (c DeleteConfig) config() Config {
	return Config{Queue: c.Queue, QueueFn: c.QueueFn, TaskIDFn: c.TaskIDFn, Writer: c.Writer, OnFailure: c.OnFailure, OnDestinationFailure: c.OnDestinationFailure,
		EmulatorEndpoint: c.EmulatorEndpoint, ServiceAccountKeyFile: c.ServiceAccountKeyFile, Client: c.Client}
}

// deleteFieldError renders a field error of the rules Config and DeleteConfig share with
// DeleteConfig's names ("DeleteConfig.Queue.Name", "WriterOptions.RecoveryMaxAttempts"); any
// other error is returned as it is.
func deleteFieldError(err error) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return err
	}
	return errors.New(fe.say(deleteFieldName))
}

// deleteFieldName names a field path of DeleteConfig in its errors.
func deleteFieldName(field string) string {
	if rest, ok := strings.CutPrefix(field, "Writer."); ok {
		return "WriterOptions." + rest
	}
	return "DeleteConfig." + field
}

// checkOnWorker is the check the delete DoFn makes of the spec it decoded, in Setup: the spec
// travels as JSON inside the pipeline, which a template, another tool or a corrupt graph may
// have changed. It applies DeleteConfig's rules again and resolves the writer options.
func (s *deleteSpec) checkOnWorker() error {
	if s == nil {
		return errors.New("the DoFn carries no delete spec: its serialized form lost it")
	}
	for _, f := range []struct {
		field string
		fn    *beam.EncodedFunc
	}{{"QueueFn", s.QueueFn}, {"TaskIDFn", s.TaskIDFn}} {
		if f.fn != nil && f.fn.Fn == nil {
			return fmt.Errorf("the delete spec has DeleteConfig.%s without its function", f.field)
		}
	}
	c := DeleteConfig{Queue: s.Queue, Writer: s.Writer, OnFailure: s.OnFailure, OnDestinationFailure: s.OnDestinationFailure, EmulatorEndpoint: s.EmulatorEndpoint,
		ServiceAccountKeyFile: s.ServiceAccountKeyFile, Client: s.Client}
	if s.QueueFn != nil {
		c.QueueFn = s.QueueFn
	}
	if err := c.validate(); err != nil {
		return err
	}
	if s.TaskIDFn == nil {
		if s.Elem == nil || s.Elem.T == nil {
			return errors.New("the delete spec has no DeleteConfig.TaskIDFn and no element type to read the keys from")
		}
		if _, err := taskIDSchema(s.Elem.T); err != nil {
			return err
		}
	}
	// validate has accepted them. Written only when they differ, as sinkSpec.resolve does.
	if w, _ := s.Writer.resolve(); w != s.Writer {
		s.Writer = w
	}
	if client := c.config().clientSpec(); client != s.client {
		s.client = client
	}
	return nil
}
