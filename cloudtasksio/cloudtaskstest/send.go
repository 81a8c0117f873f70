package cloudtaskstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// Headers and agents the service sets on dispatched requests.
const (
	httpUserAgent      = "Google-Cloud-Tasks"
	appEngineUserAgent = "AppEngine-Google; (+http://code.google.com/appengine)"
)

// outgoing is one attempt, copied out of the store under its mutex so that
// it can be sent without holding it.
type outgoing struct {
	queue, task string // full names
	method      string
	url         string
	logURL      string // scheme, host and path only: queries can carry secrets
	host        string // Host header, when it differs from the URL's host
	header      http.Header
	body        []byte
	deadline    time.Duration
	oidc        *cloudtaskspb.OidcToken
	oauth       *cloudtaskspb.OAuthToken
}

// outgoing builds the request for the next attempt of e. mu must be held;
// begin has already counted the attempt.
func (d *dispatcher) outgoing(qs *queueState, e *taskEntry) *outgoing {
	t := e.t
	out := &outgoing{queue: qs.q.GetName(), task: t.GetName(), header: http.Header{}, deadline: DefaultDispatchDeadline}
	if dd := t.GetDispatchDeadline(); dd != nil && dd.AsDuration() > 0 {
		out.deadline = dd.AsDuration()
	}
	// Values of the X-CloudTasks-* / X-AppEngine-* headers.
	meta := [][2]string{
		{"QueueName", shortID(qs.q.GetName())},
		{"TaskName", shortID(t.GetName())},
		{"TaskRetryCount", strconv.Itoa(int(t.GetDispatchCount() - 1))},
		{"TaskExecutionCount", strconv.Itoa(int(e.d.executions))},
		{"TaskETA", eta(t.GetScheduleTime().AsTime())},
	}
	if e.d.prevResponse > 0 {
		meta = append(meta, [2]string{"TaskPreviousResponse", strconv.Itoa(e.d.prevResponse)})
	}
	if e.d.retryReason != "" {
		meta = append(meta, [2]string{"TaskRetryReason", e.d.retryReason})
	}

	switch mt := t.GetMessageType().(type) {
	case *cloudtaskspb.Task_HttpRequest:
		r := mt.HttpRequest
		ht := qs.q.GetHttpTarget() // the queue's overrides; nil when it has none
		method := effectiveMethod(r.GetHttpMethod())
		if m := ht.GetHttpMethod(); m != cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED {
			method = m
		}
		out.method = method.String()
		out.url = overrideURL(r.GetUrl(), ht.GetUriOverride())
		if httpBodyMethods[method] {
			out.body = r.GetBody() // a body-less method override drops it
		}
		out.oidc, out.oauth = r.GetOidcToken(), r.GetOauthToken()
		if ht.GetAuthorizationHeader() != nil {
			out.oidc, out.oauth = ht.GetOidcToken(), ht.GetOauthToken()
		}
		tokenSet := out.oidc != nil || out.oauth != nil
		copyHeaders(out.header, r.GetHeaders(), tokenSet)
		overrides := make(map[string]string, len(ht.GetHeaderOverrides()))
		for _, h := range ht.GetHeaderOverrides() {
			overrides[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		copyHeaders(out.header, overrides, tokenSet)
		out.header.Set("User-Agent", httpUserAgent)
		for _, m := range meta {
			out.header.Set("X-CloudTasks-"+m[0], m[1])
		}
	case *cloudtaskspb.Task_AppEngineHttpRequest:
		r := mt.AppEngineHttpRequest
		out.method = effectiveMethod(r.GetHttpMethod()).String()
		uri := r.GetRelativeUri()
		if uri == "" {
			uri = "/"
		}
		out.url = strings.TrimSuffix(d.appEngine.String(), "/") + uri
		routing := r.GetAppEngineRouting()
		if o := qs.q.GetAppEngineRoutingOverride(); o != nil {
			routing = o
		}
		out.host = routingHost(routing, d.appEngine.Host)
		out.body = r.GetBody()
		copyHeaders(out.header, r.GetHeaders(), false)
		if len(out.body) > 0 && out.header.Get("Content-Type") == "" {
			out.header.Set("Content-Type", "application/octet-stream")
		}
		out.header.Set("User-Agent", appEngineUserAgent)
		for _, m := range meta {
			out.header.Set("X-AppEngine-"+m[0], m[1])
		}
	}
	if u, err := url.Parse(out.url); err == nil {
		out.logURL = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	}
	return out
}

// overrideURL applies a queue's uri_override to a task's URL. In ALWAYS
// mode (the default) each part the override sets replaces the task's:
// scheme, host (the task's port stays), port (0 removes it), path, query
// (empty values clear them). In IF_NOT_EXISTS mode a part applies only where
// the task's URL has none: a port, a path (empty or "/") or a query. A task
// URL always has a scheme and a host, so those never change in that mode.
func overrideURL(raw string, o *cloudtaskspb.UriOverride) string {
	u, err := url.Parse(raw)
	if o == nil || err != nil {
		return raw
	}
	always := o.GetUriOverrideEnforceMode() != cloudtaskspb.UriOverride_IF_NOT_EXISTS
	if o.Scheme != nil && always {
		u.Scheme = "https" // SCHEME_UNSPECIFIED defaults to HTTPS
		if *o.Scheme == cloudtaskspb.UriOverride_HTTP {
			u.Scheme = "http"
		}
	}
	if o.Host != nil && always {
		u.Host = joinHostPort(*o.Host, u.Port())
	}
	if o.Port != nil && (always || u.Port() == "") {
		port := ""
		if *o.Port > 0 {
			port = strconv.FormatInt(*o.Port, 10)
		}
		u.Host = joinHostPort(u.Hostname(), port)
	}
	if o.PathOverride != nil && (always || u.Path == "" || u.Path == "/") {
		u.Path, u.RawPath = o.GetPathOverride().GetPath(), ""
	}
	if o.QueryOverride != nil && (always || u.RawQuery == "") {
		u.RawQuery, u.ForceQuery = o.GetQueryOverride().GetQueryParams(), false
	}
	return u.String()
}

// joinHostPort is net.JoinHostPort that leaves out an empty port and takes
// an IPv6 host with or without brackets.
func joinHostPort(host, port string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if port != "" {
		return net.JoinHostPort(host, port)
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// copyHeaders copies a task's headers (or a queue's header overrides),
// leaving out the ones the service computes or reserves (and Authorization
// when a token replaces it).
func copyHeaders(dst http.Header, src map[string]string, tokenSet bool) {
	for k, v := range src {
		lk := strings.ToLower(k)
		switch {
		case lk == "host", lk == "content-length", lk == "user-agent",
			strings.HasPrefix(lk, "x-cloudtasks-"), strings.HasPrefix(lk, "x-appengine-"), strings.HasPrefix(lk, "x-google-"),
			tokenSet && lk == "authorization":
			continue
		}
		dst.Set(k, v)
	}
}

// routingHost is the Host an App Engine attempt carries: the routing's
// instance, version and service (those set, in that order) prefixed to the
// base URL's host, the way App Engine hostnames nest
// ("v2.worker.127.0.0.1:8080"). With no routing it is the base host.
func routingHost(r *cloudtaskspb.AppEngineRouting, base string) string {
	var labels []string
	for _, l := range []string{r.GetInstance(), r.GetVersion(), r.GetService()} {
		if l != "" {
			labels = append(labels, l)
		}
	}
	if len(labels) == 0 {
		return ""
	}
	return strings.Join(labels, ".") + "." + base
}

// eta formats a schedule time as the service does: seconds since the epoch
// with a fractional part.
func eta(t time.Time) string {
	return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

// result is the outcome of one attempt.
type result struct {
	code     int   // HTTP status; 0 when no response arrived
	err      error // why no response arrived
	timedOut bool  // the dispatch deadline passed
}

func (r result) responded() bool { return r.code != 0 }
func (r result) ok() bool        { return r.code >= 200 && r.code < 300 }

func (r result) String() string {
	switch {
	case r.responded():
		return strconv.Itoa(r.code)
	case r.timedOut:
		return "dispatch deadline exceeded"
	case r.err != nil:
		return r.err.Error()
	}
	return "no response"
}

func (r result) reason() string {
	switch {
	case r.responded():
		return "HTTP " + strconv.Itoa(r.code)
	case r.timedOut:
		return "DEADLINE_EXCEEDED"
	}
	return "UNAVAILABLE"
}

// httpStatusCodes are the codes of the HTTP answers that have one of their own;
// any other 5xx is INTERNAL and any other answer FAILED_PRECONDITION.
var httpStatusCodes = map[int]codes.Code{
	400: codes.InvalidArgument,
	401: codes.Unauthenticated,
	403: codes.PermissionDenied,
	404: codes.NotFound,
	409: codes.Aborted,
	429: codes.ResourceExhausted,
	501: codes.Unimplemented,
	503: codes.Unavailable,
	504: codes.DeadlineExceeded,
}

// rpcStatus maps the attempt's outcome to the status recorded in
// Attempt.response_status.
func (r result) rpcStatus() *rpcstatus.Status {
	c := codes.Unavailable
	switch {
	case r.timedOut:
		c = codes.DeadlineExceeded
	case !r.responded():
	case r.ok():
		c = codes.OK
	default:
		var known bool
		if c, known = httpStatusCodes[r.code]; !known {
			c = codes.FailedPrecondition
			if r.code >= 500 {
				c = codes.Internal
			}
		}
	}
	return &rpcstatus.Status{Code: int32(c), Message: r.String()}
}

var errNotLoopback = errors.New("cloudtaskstest: only loopback targets are reachable (see WithDispatchToAnyHost)")

// isLoopback reports whether host names this machine without a DNS lookup.
func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// send performs one attempt.
func (d *dispatcher) send(out *outgoing) result {
	u, err := url.Parse(out.url)
	if err != nil {
		return result{err: err}
	}
	if !d.anyHost && !isLoopback(u.Hostname()) {
		d.warn("dispatch refused for a host that is not loopback: " + u.Hostname())
		return result{err: errNotLoopback}
	}
	ctx, cancel := context.WithTimeout(d.ctx, out.deadline)
	defer cancel()
	var body io.Reader = http.NoBody
	if len(out.body) > 0 {
		body = bytes.NewReader(out.body)
	}
	req, err := http.NewRequestWithContext(ctx, out.method, out.url, body)
	if err != nil {
		return result{err: err}
	}
	req.Header = out.header
	if out.host != "" {
		req.Host = out.host
	}
	switch {
	case out.oidc != nil:
		aud := out.oidc.GetAudience()
		if aud == "" {
			aud = out.url
		}
		tok, err := d.auth.oidcToken(out.oidc.GetServiceAccountEmail(), aud)
		if err != nil {
			return result{err: err}
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	case out.oauth != nil:
		req.Header.Set("Authorization", "Bearer "+d.auth.oauthToken(out.oauth.GetServiceAccountEmail(), out.oauth.GetScope()))
	}
	resp, err := d.client.Do(req)
	if err != nil {
		// The client's *url.Error quotes the whole URL, whose query may carry
		// secrets; the result ends up in logs and in the task's last attempt.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return result{err: err, timedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return result{code: resp.StatusCode}
}
