package cloudtasksio

import (
	"errors"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// Telemetry selects whether the Cloud Tasks client's OpenTelemetry instrumentation (the gRPC
// stats handler the client library installs) runs.
type Telemetry int

const (
	// TelemetryDefault is the sink's default, TelemetryOff: the instrumentation costs about
	// a tenth of the CPU of each create and, unless the worker installs global OpenTelemetry
	// providers, exports nothing (https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/configuration.md has the figures).
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

// clientFieldPaths names the settings by their Config field paths, for a field error.
var clientFieldPaths = gcpconn.SettingNames{
	Endpoint: "Client.Endpoint", QuotaProject: "Client.QuotaProject", ImpersonateServiceAccount: "Client.ImpersonateServiceAccount",
	ImpersonateDelegates: "Client.ImpersonateDelegates", UniverseDomain: "Client.UniverseDomain", Emulator: "EmulatorEndpoint",
}

// checkCredentials applies the emulator and credential rules the sink shares with the
// dead-letter publisher (gcpconn.Connection.CheckCredentials) as a field error naming the
// setting at fault; a key file combined with an emulator blames EmulatorEndpoint first.
func (c Config) checkCredentials() error {
	conn := gcpconn.Connection{Emulator: c.EmulatorEndpoint, KeyFile: c.ServiceAccountKeyFile}
	check := func(n namer) error {
		return conn.CheckCredentials(gcpconn.SettingNames{Emulator: n("EmulatorEndpoint"), KeyFile: n("ServiceAccountKeyFile")})
	}
	var se *gcpconn.SettingError
	if err := check(func(path string) string { return path }); !errors.As(err, &se) {
		return err
	}
	fields := []string{se.Name}
	if c.EmulatorEndpoint != "" && se.Name != "EmulatorEndpoint" {
		fields = []string{"EmulatorEndpoint", se.Name}
	}
	return errFields(fields, func(n namer) string { return check(n).Error() })
}

// clientSpec returns the client selection of c's client fields, which validate has accepted:
// what a worker derives from the user's settings.
func (c Config) clientSpec() clientSpec {
	settings, _ := c.clientSettings()
	return clientSpec{EmulatorEndpoint: c.EmulatorEndpoint, ServiceAccountKeyFile: c.ServiceAccountKeyFile,
		ChannelPoolSize: c.Writer.ChannelPoolSize, Settings: settings}
}

// clientSettings checks c.Client against the emulator endpoint and returns the form the client
// cache keys on. A refusal is a field error naming the setting at fault.
func (c Config) clientSettings() (gcpconn.ClientSettings, error) {
	s := gcpconn.ClientSettings{
		Endpoint:                  c.Client.Endpoint,
		QuotaProject:              c.Client.QuotaProject,
		ImpersonateServiceAccount: c.Client.ImpersonateServiceAccount,
		ImpersonateDelegates:      gcpconn.JoinDelegates(c.Client.ImpersonateDelegates),
		UniverseDomain:            c.Client.UniverseDomain,
	}
	switch c.Client.Telemetry {
	case TelemetryDefault:
		s.DisableTelemetry = defaultTelemetryOff
	case TelemetryOn:
	case TelemetryOff:
		s.DisableTelemetry = true
	default:
		return s, errField("Client.Telemetry", "%d is not TelemetryDefault, TelemetryOn or TelemetryOff", c.Client.Telemetry)
	}
	// Check names the setting at fault by the names it is given: given the field paths, it
	// tells which field to blame; the message is rendered again with the names of the form
	// that reports it (Go fields or option keys).
	check := func(n namer) error {
		names := gcpconn.SettingNames{
			Endpoint: n(clientFieldPaths.Endpoint), QuotaProject: n(clientFieldPaths.QuotaProject),
			ImpersonateServiceAccount: n(clientFieldPaths.ImpersonateServiceAccount),
			ImpersonateDelegates:      n(clientFieldPaths.ImpersonateDelegates),
			UniverseDomain:            n(clientFieldPaths.UniverseDomain), Emulator: n(clientFieldPaths.Emulator),
		}
		return s.Check(names, c.EmulatorEndpoint, c.Client.ImpersonateDelegates)
	}
	var se *gcpconn.SettingError
	if err := check(func(path string) string { return path }); errors.As(err, &se) {
		return s, errFields([]string{se.Name}, func(n namer) string { return check(n).Error() })
	} else if err != nil {
		return s, err
	}
	return s, nil
}
