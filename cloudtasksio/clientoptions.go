package cloudtasksio

import (
	"fmt"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// Telemetry selects whether the Cloud Tasks client's OpenTelemetry instrumentation (the gRPC
// stats handler the client library installs) runs.
type Telemetry int

const (
	// TelemetryDefault is the sink's default, TelemetryOff: the instrumentation costs about
	// a tenth of the CPU of each create and, unless the worker installs global OpenTelemetry
	// providers, exports nothing (docs/configuration.md has the figures).
	TelemetryDefault Telemetry = iota
	// TelemetryOn keeps the client library's OpenTelemetry instrumentation: spans and metrics
	// for every create, sent wherever the worker's global OpenTelemetry providers send them.
	TelemetryOn
	// TelemetryOff removes the instrumentation from the client's connections.
	TelemetryOff
)

// defaultTelemetryOff is what TelemetryDefault means.
const defaultTelemetryOff = true

// ClientOptions configures the Cloud Tasks client each worker builds. The zero value is the
// client library's defaults: the global endpoint, the credentials' own project for quota,
// no impersonation, the googleapis.com universe. None of Endpoint, QuotaProject,
// ImpersonateServiceAccount, ImpersonateDelegates and UniverseDomain combines with
// Config.EmulatorEndpoint.
type ClientOptions struct {
	// Endpoint overrides the service's address with a TLS endpoint "host:port": a regional
	// endpoint ("us-central1-cloudtasks.googleapis.com:443") or a Private Service Connect
	// one ("cloudtasks-myendpoint.p.googleapis.com:443"). Empty means the default endpoint.
	Endpoint string
	// QuotaProject is the project billed and charged quota for the client's requests, in
	// place of the credentials' project. The caller needs serviceusage.services.use on it.
	QuotaProject string
	// ImpersonateServiceAccount is the e-mail address of a service account whose tokens the
	// client uses: the worker's credentials (ServiceAccountKeyFile or application-default)
	// ask the IAM Credentials service for them, which needs the Service Account Token Creator
	// role on the target. Empty means no impersonation.
	ImpersonateServiceAccount string
	// ImpersonateDelegates is a delegation chain of service-account e-mail addresses: each
	// holds the Token Creator role on the next, the last on ImpersonateServiceAccount, which
	// must then be set.
	ImpersonateDelegates []string
	// UniverseDomain is the Google Cloud universe the client works in ("googleapis.com" by
	// default); it must match the credentials' universe.
	UniverseDomain string
	// Telemetry selects whether the client's OpenTelemetry instrumentation runs; the default
	// is off. It is the one setting that also applies with Config.EmulatorEndpoint.
	Telemetry Telemetry
}

// clientFieldNames names the ClientOptions fields in construction errors.
var clientFieldNames = gcpconn.SettingNames{
	Endpoint:                  "Config.Client.Endpoint",
	QuotaProject:              "Config.Client.QuotaProject",
	ImpersonateServiceAccount: "Config.Client.ImpersonateServiceAccount",
	ImpersonateDelegates:      "Config.Client.ImpersonateDelegates",
	UniverseDomain:            "Config.Client.UniverseDomain",
	Emulator:                  "Config.EmulatorEndpoint",
}

// settings checks o against the emulator endpoint and returns the form the client cache keys
// on, with names for the errors.
func (o ClientOptions) settings(names gcpconn.SettingNames, emulator string) (gcpconn.ClientSettings, error) {
	s := gcpconn.ClientSettings{
		Endpoint:                  o.Endpoint,
		QuotaProject:              o.QuotaProject,
		ImpersonateServiceAccount: o.ImpersonateServiceAccount,
		ImpersonateDelegates:      gcpconn.JoinDelegates(o.ImpersonateDelegates),
		UniverseDomain:            o.UniverseDomain,
	}
	switch o.Telemetry {
	case TelemetryDefault:
		s.DisableTelemetry = defaultTelemetryOff
	case TelemetryOn:
	case TelemetryOff:
		s.DisableTelemetry = true
	default:
		return s, &gcpconn.SettingError{Name: "Config.Client.Telemetry", Reason: fmt.Sprintf("%d is not TelemetryDefault, TelemetryOn or TelemetryOff", o.Telemetry)}
	}
	return s, s.Check(names, emulator, o.ImpersonateDelegates)
}

// compileClient checks cfg.Client at construction.
func compileClient(cfg Config) (gcpconn.ClientSettings, error) {
	s, err := cfg.Client.settings(clientFieldNames, cfg.EmulatorEndpoint)
	if err != nil {
		return s, fmt.Errorf("cloudtasksio: %w", err)
	}
	return s, nil
}
