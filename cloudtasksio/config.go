package cloudtasksio

import (
	"fmt"
	"strconv"
	"strings"
)

// Config describes one Cloud Tasks sink: where tasks go, how each element becomes a task, how
// creation is retried and what happens to elements Cloud Tasks will never accept.
//
// Exactly one destination (Queue or QueueFn) and exactly one way to build the task (HTTP,
// AppEngine or Serializer) must be set. Everything else has a working default.
type Config struct {
	// Queue is the fixed queue every task is created in.
	Queue Queue
	// QueueFn resolves the queue per element: a top-level func(T) (Queue, error) registered
	// with the Beam register package. An error, or an invalid Queue, fails the bundle.
	QueueFn any

	// HTTP builds each task as a request to an HTTP(S) endpoint.
	HTTP *HTTPTarget
	// AppEngine builds each task as a request to an App Engine handler in the queue's project.
	AppEngine *AppEngineTarget
	// Serializer builds each task itself: a top-level func(T) (*cloudtaskspb.Task, error)
	// registered with the Beam register package. It must not name the task. Returning
	// (nil, nil) skips the element, counted by the recordsSkipped metric; an error sends the
	// element to the failure policy.
	Serializer any

	// TaskIDFn opts in to named tasks: a top-level func(T) (string, error) registered with the
	// Beam register package. The task id is TaskID(key), so a replayed element is deduplicated
	// by Cloud Tasks. An error or an empty key sends the element to the failure policy
	// (CodeTaskID). An element type with a `cloudtasks:"task-id"` field does the same without
	// it.
	TaskIDFn any

	// Delivery selects at-least-once creation (the default) or exactly-once staged creation.
	Delivery DeliveryGuarantee
	// Staged tunes exactly-once creation; nil means DefaultStagedOptions(). Setting it without
	// Delivery == ExactlyOnce is an error.
	Staged *StagedOptions
	// Writer tunes concurrency and retries; zero fields take their defaults.
	Writer WriterOptions
	// OnFailure decides what happens to an element whose task cannot be built or that Cloud
	// Tasks rejects as invalid. The default fails the bundle.
	OnFailure FailurePolicy
	// OnDestinationFailure decides what a failure of one queue does (NOT_FOUND once its retry
	// budget is spent, PERMISSION_DENIED, FAILED_PRECONDITION). The default fails the bundle;
	// DestinationIsolate sends that queue's elements to OnFailure and creates the other
	// queues' tasks, for a QueueFn over many queues.
	OnDestinationFailure DestinationFailurePolicy

	// EmulatorEndpoint points the sink at a Cloud Tasks emulator ("host:port") over a plaintext
	// connection without credentials. Never use it for the production service.
	EmulatorEndpoint string
	// ServiceAccountKeyFile is the path of a service-account JSON key, read on each worker when
	// its client is created. Empty means application-default credentials.
	ServiceAccountKeyFile string
	// Client configures the Cloud Tasks client: endpoint, quota project, impersonation,
	// universe domain and its OpenTelemetry instrumentation. The zero value is the client
	// library's defaults.
	Client ClientOptions
}

// DeliveryGuarantee selects how tasks are created.
type DeliveryGuarantee int

const (
	// AtLeastOnce creates tasks as elements arrive. A retried bundle creates its tasks again
	// unless they are named (TaskIDFn or a task-id field), in which case Cloud Tasks
	// deduplicates them while it remembers the name.
	AtLeastOnce DeliveryGuarantee = iota
	// ExactlyOnce (experimental) names every task before a Reshuffle and creates it after, so
	// a retried bundle re-sends the same named task. "Exactly-once and runners" in the package
	// documentation says where random ids are stable; StagedOptions sets the creation deadline.
	ExactlyOnce
)

// String returns the constant's name ("AtLeastOnce", "ExactlyOnce"), or
// "DeliveryGuarantee(<n>)" for a value that is neither.
func (d DeliveryGuarantee) String() string {
	return enumName("DeliveryGuarantee", int(d), "AtLeastOnce", "ExactlyOnce")
}

// FailurePolicy decides what happens to an element that fails on its own: its task cannot be
// built ([CodeSerialization]), it has no task-id key ([CodeTaskID]), its task is invalid by
// the sink's checks or Cloud Tasks' INVALID_ARGUMENT ([CodeInvalidArgument]), or its task is
// too large to create ([CodeTaskTooLarge]). Under Config.OnDestinationFailure
// DestinationIsolate it also takes the elements of a queue that failed ([CodeNotFound],
// [CodePermissionDenied], [CodeFailedPrecondition]). Every other failure fails the bundle
// whatever the policy.
type FailurePolicy int

const (
	// FailBundle fails the bundle, so the runner retries it or fails the job.
	FailBundle FailurePolicy = iota
	// LogAndDrop drops the element and logs a WARN line (without its payload) for each of the
	// first 10 drops of a bundle, then one line with the count of the rest when the bundle
	// ends, so a systematic rejection cannot flood the job's log. Watch the
	// numRecordsSendErrors metric, which counts every drop: under this policy it is the only
	// complete sign of failures.
	LogAndDrop
	// DeadLetter emits a deadletter.FailedElement for the element into the PCollection that
	// Write returns.
	DeadLetter
)

// String returns the constant's name ("FailBundle", "LogAndDrop", "DeadLetter"), or
// "FailurePolicy(<n>)" for an unknown value.
func (p FailurePolicy) String() string {
	return enumName("FailurePolicy", int(p), "FailBundle", "LogAndDrop", "DeadLetter")
}

// ExpiredEnvelopePolicy decides what exactly-once creation does with a staged task whose
// creation deadline has passed, because creating it now could duplicate a task whose name
// Cloud Tasks has already forgotten.
type ExpiredEnvelopePolicy int

const (
	// ExpiredFail fails the bundle (the default): an operator decides.
	ExpiredFail ExpiredEnvelopePolicy = iota
	// ExpiredAssumeCreated counts the task as created without sending it (may lose it).
	ExpiredAssumeCreated
	// ExpiredCreateAnyway sends it regardless (may duplicate it).
	ExpiredCreateAnyway
	// ExpiredDrop discards it (loses it unless the handler's own records prove completion).
	ExpiredDrop
)

// String returns the constant's name ("ExpiredFail", "ExpiredAssumeCreated",
// "ExpiredCreateAnyway", "ExpiredDrop"), or "ExpiredEnvelopePolicy(<n>)" for an unknown value.
func (p ExpiredEnvelopePolicy) String() string {
	return enumName("ExpiredEnvelopePolicy", int(p), "ExpiredFail", "ExpiredAssumeCreated", "ExpiredCreateAnyway", "ExpiredDrop")
}

// enumName returns names[v], or "<typ>(<v>)" when v is not a known value.
func enumName(typ string, v int, names ...string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(v) + ")"
}

// validate checks every rule of c that needs no element type, in a fixed order, and returns
// the first violation as a *fieldError. TryWrite runs it before the rules that need the element
// type (compile); ConfigFromOptions runs it on the Config it parsed, so both report the same
// rule the same way.
func (c Config) validate() error {
	switch {
	case c.QueueFn != nil && !c.Queue.IsZero():
		return errFields([]string{"Queue", "QueueFn"}, func(n namer) string {
			return n("Queue") + " and " + n("QueueFn") + " are both set; set exactly one destination"
		})
	case c.QueueFn == nil && c.Queue.IsZero():
		return errFields([]string{"Queue"}, func(n namer) string {
			return "no destination: set " + n("Queue") + " or " + n("QueueFn")
		})
	case c.QueueFn == nil:
		if err := c.Queue.check(); err != nil {
			return err
		}
	}
	if ways := c.taskBuilders(); ways != 1 {
		return errFields(taskBuilderFields(), func(n namer) string {
			return fmt.Sprintf("%d ways to build the task are set; set exactly one of %s", ways, taskBuilderList(n))
		})
	}
	if t := c.target(); t != nil {
		if err := t.validate(); err != nil {
			return err
		}
	}
	if _, err := c.Writer.resolve(); err != nil {
		return err
	}
	if c.OnFailure < FailBundle || c.OnFailure > DeadLetter {
		return errField("OnFailure", "%v is not FailBundle, LogAndDrop or DeadLetter", c.OnFailure)
	}
	if c.OnDestinationFailure < DestinationFailBundle || c.OnDestinationFailure > DestinationIsolate {
		return errField("OnDestinationFailure", "%v is not DestinationFailBundle or DestinationIsolate", c.OnDestinationFailure)
	}
	if c.OnDestinationFailure == DestinationIsolate && c.Delivery == ExactlyOnce {
		return errFields([]string{"OnDestinationFailure", "Delivery"}, func(n namer) string {
			return n("OnDestinationFailure") + " DestinationIsolate requires " + n("Delivery") + " AtLeastOnce: in exactly-once mode every failure fails the bundle"
		})
	}
	if _, err := c.staged(); err != nil {
		return err
	}
	if c.Delivery == ExactlyOnce && c.Writer.AttemptTimeout != 0 {
		timeout, staged := "Writer.AttemptTimeout", "Staged.RequestTimeout"
		return errFields([]string{timeout, "Delivery"}, func(n namer) string {
			return fmt.Sprintf("%s %v is set with exactly-once delivery, which bounds each create attempt by %s; set that instead",
				n(timeout), c.Writer.AttemptTimeout, n(staged))
		})
	}
	if err := c.checkCredentials(); err != nil {
		return err
	}
	if c.EmulatorEndpoint != "" && c.Writer.ChannelPoolSize != 0 {
		return errFields([]string{"Writer.ChannelPoolSize", "EmulatorEndpoint"}, func(n namer) string {
			return n("Writer.ChannelPoolSize") + " cannot be used with " + n("EmulatorEndpoint") + ", which always uses one plaintext connection"
		})
	}
	if _, err := c.clientSettings(); err != nil {
		return err
	}
	return nil
}

// taskBuilders counts the ways to build the task that c sets: its declarative targets and its
// Serializer.
func (c Config) taskBuilders() int {
	n := 0
	for _, f := range targetFamilies {
		if f.get(c) != nil {
			n++
		}
	}
	if c.Serializer != nil {
		n++
	}
	return n
}

// target returns the declarative target of c (a field of the target family table), or nil when
// none or several are set.
func (c Config) target() target {
	var found target
	for _, f := range targetFamilies {
		if t := f.get(c); t != nil {
			if found != nil {
				return nil
			}
			found = t
		}
	}
	return found
}

// fieldError is a construction error about Config fields. It carries no package prefix:
// TryWrite adds the package prefix once (boundary.go), and ConfigFromOptions turns it into an *OptionError for
// the option key its table maps the field to.
type fieldError struct {
	// fields are the paths below Config of the fields the rule is about ("HTTP.URL",
	// "Writer.RecoveryMaxBackoff", "Staged.NameRetention"), the one to blame first: the
	// option form blames the first of them whose key was given.
	fields []string
	// entries are the map entries at fault when fields[0] is a map or a format's options
	// (header names, format option names), else nil.
	entries []string
	// say renders the message, naming every field through n: Go names for TryWrite
	// ("HTTPTarget.URL"), option keys for ConfigFromOptions ("http.url").
	say func(n namer) string
}

// namer renders a Config field path for a message.
type namer func(field string) string

func (e *fieldError) Error() string { return e.say(goFieldName) }

// errField is the common field error: the field's name, then what is wrong with it and what
// is accepted.
func errField(field, format string, args ...any) *fieldError {
	msg := fmt.Sprintf(format, args...)
	return &fieldError{fields: []string{field}, say: func(n namer) string { return n(field) + " " + msg }}
}

// errFields is a field error about a rule that involves several fields, blamed in order.
func errFields(fields []string, say func(n namer) string) *fieldError {
	return &fieldError{fields: fields, say: say}
}

// withEntries records the map entries (header names, format options) the error is about.
func (e *fieldError) withEntries(entries ...string) *fieldError {
	e.entries = entries
	return e
}

// goTypeOfField names the struct type of the fields below a Config field, as messages spell
// them ("HTTPTarget.URL" rather than "Config.HTTP.URL").
var goTypeOfField = func() map[string]string {
	m := map[string]string{"Writer": "WriterOptions", "Staged": "StagedOptions"}
	for _, f := range targetFamilies {
		m[f.field] = f.goType
	}
	return m
}()

// goFieldName names a Config field path in TryWrite's errors: "HTTP.URL" is "HTTPTarget.URL",
// "Staged" is "Config.Staged", "Client.Endpoint" is "Config.Client.Endpoint".
func goFieldName(field string) string {
	head, rest, nested := strings.Cut(field, ".")
	if typ, ok := goTypeOfField[head]; ok && nested {
		return typ + "." + rest
	}
	return "Config." + field
}
