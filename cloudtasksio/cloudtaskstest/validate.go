package cloudtaskstest

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Limits the server enforces, taken from the Cloud Tasks API documentation.
const (
	// MaxTaskSize is the largest task CreateTask accepts, in bytes of the
	// task's protobuf wire encoding (proto.Size of CreateTaskRequest.task,
	// name included). The service documents "100KB"; the server reads that as
	// 100 KiB = 102,400 bytes. A task of MaxTaskSize+1 bytes is answered
	// INVALID_ARGUMENT.
	MaxTaskSize = 100 * 1024

	// MaxScheduleAhead is how far in the future a task's schedule_time may be.
	MaxScheduleAhead = 30 * 24 * time.Hour

	// DefaultTombstoneTTL is how long a released task name stays taken when
	// SetTombstoneTTL was not called for the queue (the service's default).
	DefaultTombstoneTTL = time.Hour

	// DefaultDispatchDeadline is the dispatch deadline of a task that sets
	// none.
	DefaultDispatchDeadline = 10 * time.Minute

	maxURLLength        = 2083
	maxHeaderBytes      = 80 * 1024
	minDispatchDeadline = 15 * time.Second
	maxHTTPDeadline     = 30 * time.Minute
	maxAppEngineDeadln  = 24*time.Hour + 15*time.Second
	maxIDEcho           = 120
)

var (
	projectIDRe  = regexp.MustCompile(`^[A-Za-z0-9\-:.]+$`)
	locationIDRe = regexp.MustCompile(`^[A-Za-z0-9\-]+$`)
	queueIDRe    = regexp.MustCompile(`^[A-Za-z0-9\-]{1,100}$`)
	taskIDRe     = regexp.MustCompile(`^[A-Za-z0-9_\-]{1,500}$`)
)

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// The NOT_FOUND answers, in the words Cloud Tasks uses, so that a client that tells them apart
// (a delete tells a task that is gone from a queue that is missing) sees them as it would
// against the service. The service's texts were recorded by the conformance suite of the
// community emulator (github.com/aertje/cloud-tasks-emulator, conformance/golden/realcloud.json):
// "Requested entity was not found." for DeleteTask, GetTask and RunTask of a task that is not
// there and for DeleteQueue of a missing queue; queueNotFound's text for CreateTask into, and
// GetQueue, PauseQueue, PurgeQueue and ResumeQueue of, a missing queue (recently deleted or
// never created alike); taskGone's for GetTask of a task deleted within its name's retention.
// Not recorded, and answered here by analogy: DeleteTask of such a task (taskGone, as the
// community emulator does), and DeleteTask, GetTask and ListTasks in a missing queue
// (queueNotFound, as every recorded call about a missing queue but DeleteQueue).

// notFound answers a call about a task, or a DeleteQueue, whose resource does not exist.
func notFound() error {
	return status.Error(codes.NotFound, "Requested entity was not found.")
}

// queueNotFound answers a call that needs a queue that does not exist.
func queueNotFound() error {
	return status.Error(codes.NotFound, "Queue does not exist. If you just created the queue, wait at least a minute for the queue to initialize.")
}

// taskGone answers a call about a task that ran or was deleted while its name is still taken.
func taskGone() error {
	return status.Error(codes.NotFound, "The task no longer exists, though a task with this name existed recently. The task either successfully completed or was deleted.")
}

func alreadyExists() error {
	return status.Error(codes.AlreadyExists, "Requested entity already exists")
}

// echo quotes an identifier for an error message, cut to a readable length.
// Only names are ever echoed, never bodies or headers.
func echo(s string) string {
	return fmt.Sprintf("%q", boundedtext.Cut(s, maxIDEcho))
}

// checkLocation validates "projects/P/locations/L" in the field named field.
func checkLocation(field, parent string) error {
	p := strings.Split(parent, "/")
	if len(p) != 4 || p[0] != "projects" || p[2] != "locations" ||
		!projectIDRe.MatchString(p[1]) || !locationIDRe.MatchString(p[3]) {
		return invalid("%s: %s must have the form \"projects/PROJECT_ID/locations/LOCATION_ID\"", field, echo(parent))
	}
	return nil
}

// checkQueueName validates "projects/P/locations/L/queues/Q" in the field
// named field.
func checkQueueName(field, name string) error {
	p := strings.Split(name, "/")
	if len(p) != 6 || p[0] != "projects" || p[2] != "locations" || p[4] != "queues" ||
		!projectIDRe.MatchString(p[1]) || !locationIDRe.MatchString(p[3]) {
		return invalid("%s: %s must have the form \"projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID\"", field, echo(name))
	}
	if !queueIDRe.MatchString(p[5]) {
		return invalid("%s: queue id %s must be 1 to 100 letters, digits or hyphens", field, echo(p[5]))
	}
	return nil
}

// splitTaskName validates a full task name and returns its queue path.
func splitTaskName(field, name string) (queue string, err error) {
	i := strings.LastIndex(name, "/tasks/")
	if i < 0 {
		return "", invalid("%s: %s must have the form \"projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID/tasks/TASK_ID\"", field, echo(name))
	}
	queue, id := name[:i], name[i+len("/tasks/"):]
	if err := checkQueueName(field, queue); err != nil {
		return "", invalid("%s: %s must have the form \"projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID/tasks/TASK_ID\"", field, echo(name))
	}
	if !taskIDRe.MatchString(id) {
		return "", invalid("%s: task id %s must be 1 to 500 letters, digits, hyphens or underscores", field, echo(id))
	}
	return queue, nil
}

// shortID returns the last path segment of a resource name.
func shortID(name string) string {
	return name[strings.LastIndex(name, "/")+1:]
}

// validateTask checks a CreateTask request's task against the rules the
// service enforces. parent is the (already validated) queue path; now is the
// server's clock.
func validateTask(parent string, t *cloudtaskspb.Task, now time.Time) error {
	if t == nil {
		return invalid("task: required")
	}
	if t.GetName() != "" {
		q, err := splitTaskName("task.name", t.GetName())
		if err != nil {
			return err
		}
		if q != parent {
			return invalid("task.name: the task's queue %s does not match parent %s", echo(q), echo(parent))
		}
	}
	if size := proto.Size(t); size > MaxTaskSize {
		return invalid("task: the task is %d bytes; the maximum task size is %d bytes", size, MaxTaskSize)
	}
	if st := t.GetScheduleTime(); st != nil {
		if err := st.CheckValid(); err != nil {
			return invalid("task.schedule_time: not a valid timestamp")
		}
		if st.AsTime().After(now.Add(MaxScheduleAhead)) {
			return invalid("task.schedule_time: must be at most 30 days in the future")
		}
	}
	if rc := t.GetRetryConfig(); rc != nil {
		if err := validateRetryConfig("task.retry_config", rc); err != nil {
			return err
		}
	}
	switch mt := t.GetMessageType().(type) {
	case *cloudtaskspb.Task_HttpRequest:
		if mt.HttpRequest == nil {
			return invalid("task.http_request: required")
		}
		if err := checkDeadline(t.GetDispatchDeadline(), maxHTTPDeadline, "15s and 30m"); err != nil {
			return err
		}
		return validateHTTPRequest(mt.HttpRequest)
	case *cloudtaskspb.Task_AppEngineHttpRequest:
		if mt.AppEngineHttpRequest == nil {
			return invalid("task.app_engine_http_request: required")
		}
		if err := checkDeadline(t.GetDispatchDeadline(), maxAppEngineDeadln, "15s and 24h0m15s"); err != nil {
			return err
		}
		return validateAppEngineRequest(mt.AppEngineHttpRequest)
	default:
		return invalid("task: one of http_request or app_engine_http_request is required")
	}
}

func checkDeadline(d *durationpb.Duration, max time.Duration, span string) error {
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil {
		return invalid("task.dispatch_deadline: not a valid duration")
	}
	v := d.AsDuration()
	if v == 0 { // zero means "the default", as an unset field does
		return nil
	}
	if v < minDispatchDeadline || v > max {
		return invalid("task.dispatch_deadline: %v is outside the allowed range, between %s", v, span)
	}
	return nil
}

// bodyMethods lists the methods that may carry a body, per target family.
var (
	httpBodyMethods = map[cloudtaskspb.HttpMethod]bool{
		cloudtaskspb.HttpMethod_POST: true, cloudtaskspb.HttpMethod_PUT: true, cloudtaskspb.HttpMethod_PATCH: true,
	}
	appEngineBodyMethods = map[cloudtaskspb.HttpMethod]bool{
		cloudtaskspb.HttpMethod_POST: true, cloudtaskspb.HttpMethod_PUT: true,
	}
)

// effectiveMethod maps HTTP_METHOD_UNSPECIFIED to POST, the service default.
func effectiveMethod(m cloudtaskspb.HttpMethod) cloudtaskspb.HttpMethod {
	if m == cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED {
		return cloudtaskspb.HttpMethod_POST
	}
	return m
}

func checkMethod(field string, m cloudtaskspb.HttpMethod) error {
	if _, ok := cloudtaskspb.HttpMethod_name[int32(m)]; !ok {
		return invalid("%s: unknown HTTP method %d", field, int32(m))
	}
	return nil
}

func checkHeaders(field string, h map[string]string) error {
	n := 0
	for k, v := range h {
		if k == "" {
			return invalid("%s: a header name is empty", field)
		}
		n += len(k) + len(v)
	}
	if n >= maxHeaderBytes {
		return invalid("%s: the headers take %d bytes; they must stay under %d bytes", field, n, maxHeaderBytes)
	}
	return nil
}

func validateHTTPRequest(r *cloudtaskspb.HttpRequest) error {
	if err := checkMethod("task.http_request.http_method", r.GetHttpMethod()); err != nil {
		return err
	}
	if r.GetUrl() == "" {
		return invalid("task.http_request.url: required")
	}
	if len(r.GetUrl()) > maxURLLength {
		return invalid("task.http_request.url: %d characters; the maximum is %d", len(r.GetUrl()), maxURLLength)
	}
	u, err := url.Parse(r.GetUrl())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("task.http_request.url: must be an absolute http or https URL with a host")
	}
	m := effectiveMethod(r.GetHttpMethod())
	if len(r.GetBody()) > 0 && !httpBodyMethods[m] {
		return invalid("task.http_request.body: a body is only allowed with POST, PUT or PATCH, not %s", m)
	}
	if err := checkHeaders("task.http_request.headers", r.GetHeaders()); err != nil {
		return err
	}
	// OIDC and OAuth tokens share the oneof authorization_header in the
	// proto, so a request on the wire can never carry both: the second one
	// set replaces the first when the client builds the message. Only the
	// service account each one names is left to check.
	switch a := r.GetAuthorizationHeader().(type) {
	case *cloudtaskspb.HttpRequest_OidcToken:
		if a.OidcToken.GetServiceAccountEmail() == "" {
			return invalid("task.http_request.oidc_token.service_account_email: required")
		}
	case *cloudtaskspb.HttpRequest_OauthToken:
		if a.OauthToken.GetServiceAccountEmail() == "" {
			return invalid("task.http_request.oauth_token.service_account_email: required")
		}
	}
	return nil
}

func validateAppEngineRequest(r *cloudtaskspb.AppEngineHttpRequest) error {
	if err := checkMethod("task.app_engine_http_request.http_method", r.GetHttpMethod()); err != nil {
		return err
	}
	uri := r.GetRelativeUri()
	if len(uri) > maxURLLength {
		return invalid("task.app_engine_http_request.relative_uri: %d characters; the maximum is %d", len(uri), maxURLLength)
	}
	if uri != "" && (!strings.HasPrefix(uri, "/") || strings.HasPrefix(uri, "//") ||
		strings.ContainsAny(uri, " \t\r\n#")) {
		return invalid("task.app_engine_http_request.relative_uri: must start with \"/\" and contain no whitespace or fragment")
	}
	m := effectiveMethod(r.GetHttpMethod())
	if len(r.GetBody()) > 0 && !appEngineBodyMethods[m] {
		return invalid("task.app_engine_http_request.body: a body is only allowed with POST or PUT, not %s", m)
	}
	return checkHeaders("task.app_engine_http_request.headers", r.GetHeaders())
}

// validateHTTPTarget checks a queue's http_target as the service does:
// the parts of a uri_override it sets, a known method, header overrides
// with names and under 80KB, and a queue-level token that names both its
// service account and its audience (OIDC) or scope (OAuth).
func validateHTTPTarget(ht *cloudtaskspb.HttpTarget) error {
	const f = "queue.http_target"
	if o := ht.GetUriOverride(); o != nil {
		if s := o.Scheme; s != nil {
			if _, ok := cloudtaskspb.UriOverride_Scheme_name[int32(*s)]; !ok {
				return invalid("%s.uri_override.scheme: unknown scheme %d", f, int32(*s))
			}
		}
		if h := o.Host; h != nil {
			u, err := url.Parse("//" + *h)
			if *h == "" || err != nil || u.Hostname() == "" || u.Port() != "" || u.Host != *h ||
				u.User != nil || strings.ContainsAny(*h, "/?#@ \t\r\n") {
				return invalid("%s.uri_override.host: %s must be a host name or IP address, without scheme, port or path", f, echo(*h))
			}
		}
		if p := o.Port; p != nil && (*p < 0 || *p > 65535) {
			return invalid("%s.uri_override.port: %d is not a port (1 to 65535, or 0 to clear the port)", f, *p)
		}
		if po := o.GetPathOverride(); po != nil {
			if p := po.GetPath(); p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t\r\n")) {
				return invalid("%s.uri_override.path_override.path: must be empty or start with \"/\", without query, fragment or white space", f)
			}
		}
		if strings.ContainsAny(o.GetQueryOverride().GetQueryParams(), "# \t\r\n") {
			return invalid("%s.uri_override.query_override.query_params: must not contain a fragment or white space", f)
		}
		if _, ok := cloudtaskspb.UriOverride_UriOverrideEnforceMode_name[int32(o.GetUriOverrideEnforceMode())]; !ok {
			return invalid("%s.uri_override.uri_override_enforce_mode: unknown mode %d", f, int32(o.GetUriOverrideEnforceMode()))
		}
	}
	if err := checkMethod(f+".http_method", ht.GetHttpMethod()); err != nil {
		return err
	}
	headers := make(map[string]string, len(ht.GetHeaderOverrides()))
	for i, h := range ht.GetHeaderOverrides() {
		if h.GetHeader().GetKey() == "" {
			return invalid("%s.header_overrides[%d].header.key: required", f, i)
		}
		headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	if err := checkHeaders(f+".header_overrides", headers); err != nil {
		return err
	}
	switch a := ht.GetAuthorizationHeader().(type) {
	case *cloudtaskspb.HttpTarget_OidcToken:
		if a.OidcToken.GetServiceAccountEmail() == "" || a.OidcToken.GetAudience() == "" {
			return invalid("%s.oidc_token: a queue-level OIDC token needs both service_account_email and audience", f)
		}
	case *cloudtaskspb.HttpTarget_OauthToken:
		if a.OauthToken.GetServiceAccountEmail() == "" || a.OauthToken.GetScope() == "" {
			return invalid("%s.oauth_token: a queue-level OAuth token needs both service_account_email and scope", f)
		}
	}
	return nil
}

// Queue configuration limits and the service's defaults.
const (
	maxDispatchRate      = 500
	maxConcurrentDisp    = 5000
	maxBurst             = 100
	defaultDispatchRate  = 500
	defaultConcurrent    = 1000
	defaultMaxAttempts   = 100
	defaultMinBackoff    = 100 * time.Millisecond
	defaultMaxBackoff    = time.Hour
	defaultMaxDoublings  = 16
	defaultBurstForQueue = 100
)

func validateRateLimits(rl *cloudtaskspb.RateLimits) error {
	// NaN compares false with everything: test for it by name, or a NaN rate
	// would pass and remove pacing.
	if r := rl.GetMaxDispatchesPerSecond(); math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || r > maxDispatchRate {
		return invalid("queue.rate_limits.max_dispatches_per_second: %v is not a number in (0, %d] (0 picks the default)", r, maxDispatchRate)
	}
	if c := rl.GetMaxConcurrentDispatches(); c < 0 || c > maxConcurrentDisp {
		return invalid("queue.rate_limits.max_concurrent_dispatches: %d is outside [1, %d]", c, maxConcurrentDisp)
	}
	return nil
}

func validateRetryConfig(field string, rc *cloudtaskspb.RetryConfig) error {
	if rc.GetMaxAttempts() < -1 {
		return invalid("%s.max_attempts: %d; must be -1 (unlimited) or more", field, rc.GetMaxAttempts())
	}
	if rc.GetMaxDoublings() < 0 {
		return invalid("%s.max_doublings: %d; must not be negative", field, rc.GetMaxDoublings())
	}
	for _, d := range []struct {
		name string
		v    *durationpb.Duration
	}{{"max_retry_duration", rc.GetMaxRetryDuration()}, {"min_backoff", rc.GetMinBackoff()}, {"max_backoff", rc.GetMaxBackoff()}} {
		if d.v == nil {
			continue
		}
		if d.v.CheckValid() != nil || d.v.AsDuration() < 0 {
			return invalid("%s.%s: must be a valid, non-negative duration", field, d.name)
		}
	}
	if rc.GetMinBackoff() != nil && rc.GetMaxBackoff() != nil && rc.GetMaxBackoff().AsDuration() > 0 &&
		rc.GetMinBackoff().AsDuration() > rc.GetMaxBackoff().AsDuration() {
		return invalid("%s: min_backoff must not exceed max_backoff", field)
	}
	return nil
}

// normalizeQueue fills the fields the service picks when they are unset and
// derives the output-only max_burst_size from the dispatch rate. The
// output-only host of app_engine_routing_override is left empty. A zero
// max_doublings counts as unset unless keepZeroDoublings (an UpdateQueue mask
// that names retry_config.max_doublings explicitly).
func normalizeQueue(q *cloudtaskspb.Queue, keepZeroDoublings bool) {
	if r := q.GetAppEngineRoutingOverride(); r != nil {
		r.Host = "" // output only
	}
	if q.RateLimits == nil {
		q.RateLimits = &cloudtaskspb.RateLimits{}
	}
	rl := q.RateLimits
	if rl.MaxDispatchesPerSecond == 0 {
		rl.MaxDispatchesPerSecond = defaultDispatchRate
	}
	if rl.MaxConcurrentDispatches == 0 {
		rl.MaxConcurrentDispatches = defaultConcurrent
	}
	rl.MaxBurstSize = burstFor(rl.MaxDispatchesPerSecond)
	if q.RetryConfig == nil {
		q.RetryConfig = &cloudtaskspb.RetryConfig{}
	}
	rc := q.RetryConfig
	if rc.MaxAttempts == 0 {
		rc.MaxAttempts = defaultMaxAttempts
	}
	if rc.MaxRetryDuration == nil {
		rc.MaxRetryDuration = durationpb.New(0)
	}
	if rc.MinBackoff == nil || rc.MinBackoff.AsDuration() == 0 {
		rc.MinBackoff = durationpb.New(defaultMinBackoff)
	}
	if rc.MaxBackoff == nil || rc.MaxBackoff.AsDuration() == 0 {
		rc.MaxBackoff = durationpb.New(defaultMaxBackoff)
	}
	if rc.MaxBackoff.AsDuration() < rc.MinBackoff.AsDuration() {
		rc.MaxBackoff = durationpb.New(rc.MinBackoff.AsDuration())
	}
	if rc.MaxDoublings == 0 && !keepZeroDoublings {
		rc.MaxDoublings = defaultMaxDoublings
	}
}

// burstFor is the emulator's choice of max_burst_size, an output-only field
// the service derives from the rate by an unpublished rule: the rate rounded
// up, between 1 and 100 (so the default rate of 500/s gets the 100 the
// service reports for default queues).
func burstFor(rate float64) int32 {
	b := int32(rate)
	if float64(b) < rate {
		b++
	}
	return max(1, min(b, maxBurst))
}
