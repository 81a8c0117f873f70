package gcpconn

import (
	"fmt"
	"strings"
	"unicode"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials/impersonate"
	"google.golang.org/api/option"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// ClientSettings are the client settings the sink and the dead-letter publisher share: where
// the client connects, which project is billed, whose identity it takes and whether its
// OpenTelemetry instrumentation runs. The zero value is the client library's defaults with
// the instrumentation on; each package decides its own default for Telemetry before it
// builds a ClientSettings.
type ClientSettings struct {
	Endpoint                  string `json:",omitempty"`
	QuotaProject              string `json:",omitempty"`
	ImpersonateServiceAccount string `json:",omitempty"`
	// ImpersonateDelegates is the delegation chain joined with ",", so that ClientSettings
	// stays comparable and can key a client cache (an e-mail address holds no comma).
	ImpersonateDelegates string `json:",omitempty"`
	UniverseDomain       string `json:",omitempty"`
	DisableTelemetry     bool   `json:",omitempty"`
}

// SettingNames are the names the errors of Check give each setting: struct fields
// ("Config.Client.Endpoint") or option keys ("client.endpoint").
type SettingNames struct {
	Endpoint, QuotaProject, ImpersonateServiceAccount, ImpersonateDelegates, UniverseDomain string
	// Emulator names the emulator endpoint, which excludes every connection setting.
	Emulator string
	// KeyFile names the service-account key file (Connection.CheckCredentials and Options).
	KeyFile string
}

// SettingError is an error of Check: Name is the setting at fault, as SettingNames spells
// it, and Reason what is wrong. Neither repeats anything secret (the settings hold none).
type SettingError struct {
	Name, Reason string
}

// Error returns "<name> <reason>".
func (e *SettingError) Error() string { return e.Name + " " + e.Reason }

// JoinDelegates joins a delegation chain as ClientSettings keeps it.
func JoinDelegates(delegates []string) string { return strings.Join(delegates, ",") }

// Delegates returns the delegation chain, or nil.
func (s ClientSettings) Delegates() []string {
	if s.ImpersonateDelegates == "" {
		return nil
	}
	return strings.Split(s.ImpersonateDelegates, ",")
}

// connects reports the settings that change where or as whom the client connects.
func (s ClientSettings) connects() bool {
	return s.Endpoint != "" || s.QuotaProject != "" || s.ImpersonateServiceAccount != "" ||
		s.ImpersonateDelegates != "" || s.UniverseDomain != ""
}

// Check refuses settings that cannot work, naming the setting through n. emulator is the
// emulator endpoint, or empty: an emulator is reached in plaintext without credentials at the
// address it names, so no endpoint, quota project, impersonation or universe domain combines
// with it (the telemetry switch does). delegates is the chain as the user gave it, so that an
// empty entry or one holding a comma is caught before it is joined.
func (s ClientSettings) Check(n SettingNames, emulator string, delegates []string) error {
	bad := func(name, format string, args ...any) error {
		return &SettingError{Name: name, Reason: fmt.Sprintf(format, args...)}
	}
	if emulator != "" && (s.connects() || len(delegates) > 0) {
		name := n.Endpoint
		switch {
		case s.Endpoint != "":
		case s.QuotaProject != "":
			name = n.QuotaProject
		case s.ImpersonateServiceAccount != "":
			name = n.ImpersonateServiceAccount
		case len(delegates) > 0:
			name = n.ImpersonateDelegates
		default:
			name = n.UniverseDomain
		}
		return bad(name, "cannot be combined with %s: an emulator is reached in plaintext, without credentials, at the address %s names", n.Emulator, n.Emulator)
	}
	if s.Endpoint != "" {
		if err := CheckEndpoint(s.Endpoint); err != nil {
			return bad(n.Endpoint, "%v (a TLS endpoint such as \"us-central1-cloudtasks.googleapis.com:443\", without a scheme or path)", err)
		}
	}
	if s.QuotaProject != "" && !ValidProject(s.QuotaProject) {
		return bad(n.QuotaProject, "%s is not a project id; want lowercase letters, digits and hyphens, starting with a letter, or a project number", boundedtext.Quote(s.QuotaProject))
	}
	if s.ImpersonateServiceAccount != "" && !email(s.ImpersonateServiceAccount) {
		return bad(n.ImpersonateServiceAccount, "%s is not a service-account e-mail address; want %s", boundedtext.Quote(s.ImpersonateServiceAccount), EmailShape)
	}
	if len(delegates) > 0 && s.ImpersonateServiceAccount == "" {
		return bad(n.ImpersonateDelegates, "needs %s: delegates only relay the impersonation of a target service account", n.ImpersonateServiceAccount)
	}
	for i, d := range delegates {
		if !email(d) {
			return bad(n.ImpersonateDelegates, "entry %d (%s) is not a service-account e-mail address; want %s", i, boundedtext.Quote(d), EmailShape)
		}
	}
	if s.UniverseDomain != "" && !domain(s.UniverseDomain) {
		return bad(n.UniverseDomain, "%s is not a domain name such as \"googleapis.com\" (no scheme, port or path; at most %d bytes)", boundedtext.Quote(s.UniverseDomain), MaxHostBytes)
	}
	return nil
}

// ValidProject accepts project ids ("my-project"), domain-scoped ids
// ("example.com:my-project") and project numbers, up to 100 characters: Google
// Cloud's project-id rule, used for Pub/Sub topic paths and the quota project.
// The Cloud Tasks queue path has a looser rule of its own, the one that API
// documents (cloudtasksio's validProject).
func ValidProject(p string) bool {
	if p == "" || len(p) > 100 {
		return false
	}
	id := p
	if i := strings.LastIndexByte(p, ':'); i >= 0 {
		domain := p[:i]
		id = p[i+1:]
		if domain == "" {
			return false
		}
		for _, r := range domain {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
				return false
			}
		}
	}
	if id == "" || id[len(id)-1] == '-' {
		return false
	}
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}

// email accepts local@domain without whitespace or commas.
func email(s string) bool {
	local, dom, ok := strings.Cut(s, "@")
	return ok && len(s) <= MaxEmailBytes && local != "" && len(local) <= maxEmailLocalBytes && domain(dom) &&
		!strings.ContainsFunc(local, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsControl(r) || r == ',' || r == '@' || r == '/'
		})
}

// MaxEmailBytes is the longest e-mail address (RFC 5321's path limit less its brackets): 254
// bytes. Service-account e-mails are far shorter.
const MaxEmailBytes = 254

// maxEmailLocalBytes is the longest part before the '@' (RFC 5321): 64 bytes.
const maxEmailLocalBytes = 64

// ValidEmail reports whether s can be a service-account e-mail address: name@domain, with no
// whitespace, control character, ',' or '/' in the name, dot-separated labels of letters,
// digits and hyphens in the domain, at most MaxEmailBytes in all. It checks the shape only,
// so every kind of service account passes: user-managed ones, the Compute Engine and App
// Engine default accounts, Google-managed ones.
func ValidEmail(s string) bool { return email(s) }

// EmailShape says what ValidEmail accepts, for the errors that refuse an address.
const EmailShape = "name@domain, at most 254 bytes, such as name@my-project.iam.gserviceaccount.com or 123456789-compute@developer.gserviceaccount.com"

// domain accepts dot-separated labels of letters, digits and hyphens.
func domain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// Impersonate makes impersonated credentials on base (nil: application-default credentials);
// tests replace it to see what is asked without reaching the IAM service.
var Impersonate = func(opts *impersonate.CredentialsOptions) (*auth.Credentials, error) {
	return impersonate.NewCredentials(opts)
}

// Options translates checked settings into client options for a client whose tokens need
// scopes. base is the credentials of a key file, or nil for application-default credentials;
// with impersonation it becomes the identity that asks for the target's tokens, and the
// returned options carry the impersonated credentials in its place. The error is a fixed
// sentence (the impersonation library's own message can quote the environment).
func (s ClientSettings) Options(scopes []string, base *auth.Credentials) ([]option.ClientOption, error) {
	var opts []option.ClientOption
	if s.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(s.Endpoint))
	}
	if s.QuotaProject != "" {
		opts = append(opts, option.WithQuotaProject(s.QuotaProject))
	}
	if s.UniverseDomain != "" {
		opts = append(opts, option.WithUniverseDomain(s.UniverseDomain))
	}
	if s.DisableTelemetry {
		opts = append(opts, option.WithTelemetryDisabled())
	}
	creds := base
	if s.ImpersonateServiceAccount != "" {
		var err error
		creds, err = Impersonate(&impersonate.CredentialsOptions{
			TargetPrincipal: s.ImpersonateServiceAccount,
			Delegates:       s.Delegates(),
			Scopes:          scopes,
			Credentials:     base,
			UniverseDomain:  s.UniverseDomain,
		})
		if err != nil {
			return nil, fmt.Errorf("impersonating %s failed: the base credentials (a key file or application-default credentials) could not be loaded or used", s.ImpersonateServiceAccount)
		}
	}
	if creds != nil {
		opts = append(opts, option.WithAuthCredentials(creds))
	}
	return opts, nil
}
