package pubsubdl

import (
	"fmt"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// Telemetry selects whether the Pub/Sub client's OpenTelemetry instrumentation (the gRPC
// stats handler the client library installs) runs.
type Telemetry int

const (
	// TelemetryDefault keeps the instrumentation on, as the client library does: the
	// publisher sends only failed elements, so the instrumentation's cost per message does
	// not matter the way it does for the sink's creates (https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/configuration.md).
	TelemetryDefault Telemetry = iota
	// TelemetryOn keeps the client library's OpenTelemetry instrumentation.
	TelemetryOn
	// TelemetryOff removes the instrumentation from the client's connections.
	TelemetryOff
)

// ClientOptions configures the Pub/Sub client each worker builds for ToPubSub. The zero
// value is the client library's defaults. None of Endpoint, QuotaProject,
// ImpersonateServiceAccount, ImpersonateDelegates and UniverseDomain combines with
// PubSubConfig.EmulatorEndpoint.
type ClientOptions struct {
	// Endpoint overrides the service's address with a TLS endpoint "host:port", for example
	// a regional endpoint ("us-central1-pubsub.googleapis.com:443") or a Private Service
	// Connect one. Empty means the default endpoint.
	Endpoint string
	// QuotaProject is the project billed and charged quota for the client's requests, in
	// place of the credentials' project.
	QuotaProject string
	// ImpersonateServiceAccount is the e-mail address of a service account whose tokens the
	// client uses, obtained with the worker's credentials (ServiceAccountKeyFile or
	// application-default), which need the Service Account Token Creator role on it.
	ImpersonateServiceAccount string
	// ImpersonateDelegates is a delegation chain of service-account e-mail addresses ending
	// at ImpersonateServiceAccount, which must then be set.
	ImpersonateDelegates []string
	// UniverseDomain is the Google Cloud universe the client works in ("googleapis.com" by
	// default); it must match the credentials' universe.
	UniverseDomain string
	// Telemetry selects whether the client's OpenTelemetry instrumentation runs.
	Telemetry Telemetry
}

var clientFieldNames = gcpconn.SettingNames{
	Endpoint:                  "Client.Endpoint",
	QuotaProject:              "Client.QuotaProject",
	ImpersonateServiceAccount: "Client.ImpersonateServiceAccount",
	ImpersonateDelegates:      "Client.ImpersonateDelegates",
	UniverseDomain:            "Client.UniverseDomain",
	Emulator:                  "EmulatorEndpoint",
	KeyFile:                   "ServiceAccountKeyFile",
}

// settings checks o against the emulator endpoint and returns the form the publisher cache
// keys on.
func (o ClientOptions) settings(emulator string) (gcpconn.ClientSettings, error) {
	s := gcpconn.ClientSettings{
		Endpoint:                  o.Endpoint,
		QuotaProject:              o.QuotaProject,
		ImpersonateServiceAccount: o.ImpersonateServiceAccount,
		ImpersonateDelegates:      gcpconn.JoinDelegates(o.ImpersonateDelegates),
		UniverseDomain:            o.UniverseDomain,
	}
	switch o.Telemetry {
	case TelemetryDefault, TelemetryOn:
	case TelemetryOff:
		s.DisableTelemetry = true
	default:
		return s, fmt.Errorf("Client.Telemetry %d is not TelemetryDefault, TelemetryOn or TelemetryOff", o.Telemetry)
	}
	if err := s.Check(clientFieldNames, emulator, o.ImpersonateDelegates); err != nil {
		return s, err
	}
	return s, nil
}
