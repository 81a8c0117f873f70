package cloudtasksio

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// This file is the HTTP target family: its configuration, its rules, how it builds a task's
// request and its option keys.

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
// bearer token. The account must belong to the queue's project. Audience defaults to the
// task's whole URL when empty; when the URL has a path or a query, set it to the service's root
// URL ("https://orders-abc-uc.a.run.app"), the audience Cloud Run and Cloud Functions check. A
// handler elsewhere must validate the token itself (signature, issuer, audience, email claim);
// the X-CloudTasks-* headers of a request prove nothing, anyone can send them. See
// https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/credentials.md.
type OIDCToken struct{ ServiceAccountEmail, Audience string }

// OAuthToken asks Cloud Tasks to send an OAuth access token of ServiceAccountEmail. Scope
// defaults to "https://www.googleapis.com/auth/cloud-platform" when empty.
type OAuthToken struct{ ServiceAccountEmail, Scope string }

// maxHTTPDispatchDL is the longest dispatch deadline of an HTTP task.
const maxHTTPDispatchDL = 30 * time.Minute

func (t *HTTPTarget) family() *targetFamily { return &httpFamily }

func (t *HTTPTarget) body() *formats.Format { return &t.Body }

func (t *HTTPTarget) metadataKeys() []string {
	return append([]string{bodyformat.KeyURL}, commonMetadataKeys...)
}

func (t *HTTPTarget) fixed() fixedParts {
	return fixedParts{field: "HTTP", method: t.Method, headers: t.Headers, body: t.Body, dispatchDeadline: t.DispatchDeadline,
		maxDeadline: maxHTTPDispatchDL}
}

// validate checks the HTTP target's rules that need no element type: a fixed URL (when set),
// the shared parts, and at most one token with a service account.
func (t *HTTPTarget) validate() error {
	if t.URL != "" {
		if err := checkURL(t.URL); err != nil {
			return errField("HTTP.URL", "%v (accepted: an absolute http or https URL of at most %d characters)", err, maxURLLength)
		}
	}
	if err := t.fixed().validate(); err != nil {
		return err
	}
	switch {
	case t.OIDC != nil && t.OAuth != nil:
		return errFields([]string{"HTTP.OAuth", "HTTP.OIDC"}, func(n namer) string {
			return n("HTTP.OIDC") + " and " + n("HTTP.OAuth") + " are both set; a task carries at most one token (OIDC for Cloud Run and other OIDC endpoints, OAuth for *.googleapis.com)"
		})
	case t.OIDC != nil && strings.TrimSpace(t.OIDC.ServiceAccountEmail) == "":
		return errFields([]string{"HTTP.OIDC.ServiceAccountEmail", "HTTP.OIDC"}, func(n namer) string {
			return n("HTTP.OIDC.ServiceAccountEmail") + " is blank; it names the service account whose OIDC token Cloud Tasks sends"
		})
	case t.OAuth != nil && strings.TrimSpace(t.OAuth.ServiceAccountEmail) == "":
		return errFields([]string{"HTTP.OAuth.ServiceAccountEmail", "HTTP.OAuth"}, func(n namer) string {
			return n("HTTP.OAuth.ServiceAccountEmail") + " is blank; it names the service account whose OAuth token Cloud Tasks sends"
		})
	case t.OIDC != nil && !gcpconn.ValidEmail(t.OIDC.ServiceAccountEmail):
		return errField("HTTP.OIDC.ServiceAccountEmail", badEmail, boundedtext.Quote(t.OIDC.ServiceAccountEmail), gcpconn.EmailShape)
	case t.OAuth != nil && !gcpconn.ValidEmail(t.OAuth.ServiceAccountEmail):
		return errField("HTTP.OAuth.ServiceAccountEmail", badEmail, boundedtext.Quote(t.OAuth.ServiceAccountEmail), gcpconn.EmailShape)
	}
	return nil
}

// badEmail is the message of a token's service-account e-mail that cannot be one.
const badEmail = "%s is not a service-account e-mail address; want %s"

// compile requires a URL: the fixed one, or a url field on every element.
func (t *HTTPTarget) compile(s *bodyformat.Schema) error {
	if t.URL == "" && !s.Has(bodyformat.KeyURL) {
		return errField("HTTP.URL", "is empty and %v has no `cloudtasks:\"url\"` field", s.Type())
	}
	return nil
}

// carriesBody reports whether an HTTP request has a body under method m: POST, PUT, PATCH.
func (t *HTTPTarget) carriesBody(m cloudtaskspb.HttpMethod) bool { return httpCarriesBody(m) }

func httpCarriesBody(m cloudtaskspb.HttpMethod) bool {
	switch effectiveMethod(m) {
	case cloudtaskspb.HttpMethod_POST, cloudtaskspb.HttpMethod_PUT, cloudtaskspb.HttpMethod_PATCH:
		return true
	}
	return false
}

// request builds the HTTP task: the element's url field overrides the fixed URL, and the
// target's token is attached.
func (t *HTTPTarget) request(p requestParts, md *bodyformat.Metadata) *cloudtaskspb.Task {
	req := &cloudtaskspb.HttpRequest{Url: t.URL, HttpMethod: p.method, Headers: p.headers, Body: p.body}
	if md.URL != "" {
		req.Url = md.URL
	}
	switch {
	case t.OIDC != nil:
		req.AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: t.OIDC.ServiceAccountEmail, Audience: t.OIDC.Audience}}
	case t.OAuth != nil:
		req.AuthorizationHeader = &cloudtaskspb.HttpRequest_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{
			ServiceAccountEmail: t.OAuth.ServiceAccountEmail, Scope: t.OAuth.Scope}}
	}
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: req}}
}

// checkHTTPTask checks the request of a built HTTP task, however it was built.
func checkHTTPTask(t *cloudtaskspb.Task) error {
	r := t.GetHttpRequest()
	if err := checkURL(r.GetUrl()); err != nil {
		return fmt.Errorf("task http_request.url %w", err)
	}
	if err := checkRequest("http_request", r.GetHttpMethod(), r.GetBody(), r.GetHeaders(), httpCarriesBody, "POST, PUT and PATCH", nil); err != nil {
		return err
	}
	if tok := r.GetOidcToken(); tok != nil && strings.TrimSpace(tok.GetServiceAccountEmail()) == "" {
		return fmt.Errorf("task http_request.oidc_token.service_account_email is blank")
	}
	if tok := r.GetOauthToken(); tok != nil && strings.TrimSpace(tok.GetServiceAccountEmail()) == "" {
		return fmt.Errorf("task http_request.oauth_token.service_account_email is blank")
	}
	return checkTaskDispatchDeadline(t, maxHTTPDispatchDL)
}

// checkURL accepts an absolute http or https URL with a host, at most 2083 characters. The
// error follows the name of what carried the URL and never repeats it.
func checkURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("is empty")
	}
	if len(raw) > maxURLLength {
		return fmt.Errorf("is %d characters long; the limit is %d", len(raw), maxURLLength)
	}
	if strings.IndexFunc(raw, func(r rune) bool { return isSpace(r) || r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("contains whitespace or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("is not a valid URL")
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return fmt.Errorf("must be an absolute http or https URL")
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("has no host")
	}
	return nil
}

// httpFamily is the HTTP row of the target family table: target.type "http", Config.HTTP and
// the http.* option keys.
var httpFamily = newFamily("http", "HTTP", func(c *Config) **HTTPTarget { return &c.HTTP },
	func() *HTTPTarget { return &HTTPTarget{Method: "POST"} }, []optionRow{
		optionOf("http.url", "HTTP.URL", textValue, func(c *Config) *string { return &c.HTTP.URL }).
			withHelp("accepted: an absolute http or https URL (leave the key out when every element carries a url field)"),
		optionOf("http.method", "HTTP.Method", methodValue, func(c *Config) *string { return &c.HTTP.Method }),
		headerRow("http.headers.", "HTTP.Headers", func(c *Config) *map[string]string { return &c.HTTP.Headers }),
		optionOf("http.oidc.service-account-email", "HTTP.OIDC.ServiceAccountEmail", textValue,
			func(c *Config) *string { return &oidcOf(c).ServiceAccountEmail }).withHelp("accepted: a service-account e-mail address"),
		optionOf("http.oidc.audience", "HTTP.OIDC.Audience", textValue, func(c *Config) *string { return &oidcOf(c).Audience }),
		optionOf("http.oauth.service-account-email", "HTTP.OAuth.ServiceAccountEmail", textValue,
			func(c *Config) *string { return &oauthOf(c).ServiceAccountEmail }).withHelp("accepted: a service-account e-mail address"),
		optionOf("http.oauth.scope", "HTTP.OAuth.Scope", textValue, func(c *Config) *string { return &oauthOf(c).Scope }),
		optionOf("http.dispatch-deadline", "HTTP.DispatchDeadline", durationValue, func(c *Config) *time.Duration { return &c.HTTP.DispatchDeadline }),
	})

// oidcOf returns the HTTP target's OIDC token, created on first use.
func oidcOf(c *Config) *OIDCToken {
	if c.HTTP.OIDC == nil {
		c.HTTP.OIDC = &OIDCToken{}
	}
	return c.HTTP.OIDC
}

// oauthOf returns the HTTP target's OAuth token, created on first use.
func oauthOf(c *Config) *OAuthToken {
	if c.HTTP.OAuth == nil {
		c.HTTP.OAuth = &OAuthToken{}
	}
	return c.HTTP.OAuth
}
