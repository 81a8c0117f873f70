package cloudtasksio

import (
	"strconv"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
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
	// by Cloud Tasks. An error sends the element to the failure policy; an empty key fails the
	// bundle. An element type with a `cloudtasks:"task-id"` field does the same without it.
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

// HTTPTarget builds tasks that Cloud Tasks delivers to an HTTP(S) endpoint.
type HTTPTarget struct {
	// URL is the absolute http or https URL every task calls. A `cloudtasks:"url"` field on
	// the element overrides it per element; without such a field it is required.
	URL string
	// Method is the HTTP method: POST (the default), GET, HEAD, PUT, DELETE, PATCH or OPTIONS.
	Method string
	// Headers are sent with every task. A `cloudtasks:"headers"` field on the element
	// replaces entries by case-insensitive name.
	Headers map[string]string
	// OIDC makes Cloud Tasks attach an OIDC token when it calls the URL. At most one of OIDC
	// and OAuth may be set.
	OIDC *OIDCToken
	// OAuth makes Cloud Tasks attach an OAuth access token (for *.googleapis.com endpoints).
	OAuth *OAuthToken
	// Body encodes the element as the request body. It is used only under POST, PUT and
	// PATCH; the zero Format sends no body.
	Body formats.Format
	// DispatchDeadline bounds each dispatch attempt of the task. Zero leaves the service
	// default (10 minutes); otherwise it must lie in [15s, 30m]. A `cloudtasks:"dispatch-deadline"`
	// field on the element overrides it per element.
	DispatchDeadline time.Duration
}

// OIDCToken asks Cloud Tasks to sign an OIDC token for ServiceAccountEmail and send it as a
// bearer token. Audience defaults to the task's URL when empty.
type OIDCToken struct{ ServiceAccountEmail, Audience string }

// OAuthToken asks Cloud Tasks to send an OAuth access token of ServiceAccountEmail. Scope
// defaults to "https://www.googleapis.com/auth/cloud-platform" when empty.
type OAuthToken struct{ ServiceAccountEmail, Scope string }

// AppEngineTarget builds tasks that Cloud Tasks delivers to an App Engine application in the
// queue's own project and region.
type AppEngineTarget struct {
	// RelativeURI is the path and query of the handler: empty (the root) or starting with
	// "/". A `cloudtasks:"relative-uri"` field on the element overrides it per element.
	RelativeURI string
	// Method is the HTTP method: POST (the default), GET, HEAD, PUT, DELETE, PATCH or OPTIONS.
	Method string
	// Headers are sent with every task. Host, Content-Length, X-Google-* and X-AppEngine-*
	// belong to the service and are rejected.
	Headers map[string]string
	// Routing selects the service, version and instance; nil leaves the choice to App Engine.
	Routing *AppEngineRouting
	// Body encodes the element as the request body. It is used only under POST and PUT.
	Body formats.Format
	// DispatchDeadline bounds each dispatch attempt of the task. Zero leaves the service
	// default, which depends on the service's scaling type; otherwise it must lie in
	// [15s, 24h0m15s]. A `cloudtasks:"dispatch-deadline"` field on the element overrides it
	// per element.
	DispatchDeadline time.Duration
}

// AppEngineRouting selects where in the application a task runs. Empty parts are chosen by
// App Engine.
type AppEngineRouting struct{ Service, Version, Instance string }

// WriterOptions tune how fast and how persistently one worker creates tasks. The zero value
// of every field means its default. They do not pace delivery: the queue does that.
type WriterOptions struct {
	// MaxInFlightTasks caps the creates one DoFn instance has outstanding, counting those in
	// flight and those parked for a retry. Default 1000.
	MaxInFlightTasks int
	// ChannelPoolSize is the number of gRPC connections of the shared client. Each carries
	// about 100 concurrent creates. Default 0: the client's single connection. Not allowed
	// with an emulator.
	ChannelPoolSize int
	// RecoveryInitialBackoff is the first wait after UNAVAILABLE, DEADLINE_EXCEEDED or
	// RESOURCE_EXHAUSTED. Default 100ms.
	RecoveryInitialBackoff time.Duration
	// RecoveryMaxBackoff caps that wait as it doubles. Default 10s.
	RecoveryMaxBackoff time.Duration
	// RecoveryMaxAttempts is the number of attempts, the first included, before a transient
	// failure fails the bundle. Default 8.
	RecoveryMaxAttempts int
	// NotFoundRecoveryInitialBackoff is the first wait after NOT_FOUND. Default 500ms.
	NotFoundRecoveryInitialBackoff time.Duration
	// NotFoundRecoveryMaxBackoff caps the NOT_FOUND wait. Default 2s.
	NotFoundRecoveryMaxBackoff time.Duration
	// NotFoundRecoveryMaxAttempts is the number of NOT_FOUND attempts, the first included,
	// before the bundle fails. Kept short so a mistyped queue fails fast. Default 3.
	NotFoundRecoveryMaxAttempts int
	// PerDestinationMetrics adds recordsSend and sendErrors counters per queue. Default false.
	PerDestinationMetrics bool
}

// DeliveryGuarantee selects how tasks are created.
type DeliveryGuarantee int

const (
	// AtLeastOnce creates tasks as elements arrive. A retried bundle creates its tasks again
	// unless they are named (TaskIDFn or a task-id field), in which case Cloud Tasks
	// deduplicates them while it remembers the name.
	AtLeastOnce DeliveryGuarantee = iota
	// ExactlyOnce names every task before a Reshuffle and creates it after, so a retried
	// bundle re-sends the same named task. "Exactly-once and runners" in the package
	// documentation says where random ids are stable; StagedOptions sets the creation deadline.
	ExactlyOnce
)

// String returns the constant's name ("AtLeastOnce", "ExactlyOnce"), or
// "DeliveryGuarantee(<n>)" for a value that is neither.
func (d DeliveryGuarantee) String() string {
	return enumName("DeliveryGuarantee", int(d), "AtLeastOnce", "ExactlyOnce")
}

// FailurePolicy decides what happens to an element whose task cannot be built, whose task-id
// function fails, or whose task Cloud Tasks rejects with INVALID_ARGUMENT. Every other failure
// fails the bundle whatever the policy.
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

// StagedOptions tune exactly-once creation. They are checked at construction and again on
// each worker; a value out of range is an error naming the field.
type StagedOptions struct {
	// NameRetention is how long the queue is assumed to remember a task name (H). Default 1h;
	// positive, at most 31 days.
	NameRetention time.Duration
	// ClockSkewAllowance is the clock error allowed between workers (E). Default 5m; from 0
	// to 24h.
	ClockSkewAllowance time.Duration
	// RequestTimeout bounds each create call (S). Default 20s; positive, at most 30m.
	RequestTimeout time.Duration
	// VerifyQueueRetention reads the queue's tombstone_ttl before the first create and fails
	// when it is shorter than NameRetention. Default true.
	VerifyQueueRetention bool
	// ExpiredEnvelopePolicy decides what happens to a staged task past its deadline.
	ExpiredEnvelopePolicy ExpiredEnvelopePolicy
}

// DefaultStagedOptions returns the exactly-once defaults: 1h retention, 5m clock skew, 20s
// request timeout, retention verified, expired envelopes fail the bundle.
func DefaultStagedOptions() StagedOptions {
	return StagedOptions{
		NameRetention:         time.Hour,
		ClockSkewAllowance:    5 * time.Minute,
		RequestTimeout:        20 * time.Second,
		VerifyQueueRetention:  true,
		ExpiredEnvelopePolicy: ExpiredFail,
	}
}
