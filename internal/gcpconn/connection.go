package gcpconn

import (
	"fmt"
	"strings"

	"cloud.google.com/go/auth"
	"google.golang.org/api/option"
)

// Connection is how a client reaches its service: an emulator at Emulator ("host:port"), in
// plaintext and without credentials, or the service itself with the credentials of the
// service-account key at KeyFile (empty: application-default credentials), with Settings on
// top. The sink and the dead-letter publisher check and build their clients through it, so
// both follow one set of emulator and credential rules.
type Connection struct {
	Emulator string
	KeyFile  string
	Settings ClientSettings
}

// CheckCredentials applies the emulator and credential rules, naming the setting at fault
// through n: the emulator endpoint must be host:port (see CheckEndpoint), a key file must not
// be combined with an emulator, whose plaintext connection carries no credentials, and must
// not be blank. Its errors are *SettingError. Settings are checked by ClientSettings.Check.
func (c Connection) CheckCredentials(n SettingNames) error {
	if c.Emulator != "" {
		if err := CheckEndpoint(c.Emulator); err != nil {
			return &SettingError{Name: n.Emulator, Reason: err.Error()}
		}
		if c.KeyFile != "" {
			return &SettingError{Name: n.KeyFile, Reason: "cannot be used with " + n.Emulator + ", whose plaintext connection carries no credentials"}
		}
	}
	if c.KeyFile != "" && strings.TrimSpace(c.KeyFile) == "" {
		return &SettingError{Name: n.KeyFile, Reason: "is blank; leave it empty for application-default credentials or give a path"}
	}
	if err := CheckPath(n.KeyFile, c.KeyFile); err != nil {
		return err
	}
	return nil
}

// MaxPathBytes is the longest file path a setting may hold: 4096 bytes, Linux's PATH_MAX.
const MaxPathBytes = 4096

// CheckPath refuses a file path of the setting named name that no system can open: one with a
// NUL byte, or longer than MaxPathBytes. An empty path passes. The error never repeats the
// path: a mistaken path may hold what should have been the key itself.
func CheckPath(name, path string) error {
	switch {
	case strings.IndexByte(path, 0) >= 0:
		return &SettingError{Name: name, Reason: "contains a NUL byte, which no file path can hold"}
	case len(path) > MaxPathBytes:
		return &SettingError{Name: name, Reason: fmt.Sprintf("is %d bytes long; a file path has at most %d", len(path), MaxPathBytes)}
	}
	return nil
}

// KeyLoader reads a service-account key file for tokens that need scopes;
// LoadServiceAccountKey is the one the workers use.
type KeyLoader func(path string, scopes []string) (*auth.Credentials, error)

// Options returns the options of a client that connects as c, for tokens that need scopes.
// With an emulator they are EmulatorOptions and at most the telemetry switch: never
// credentials (CheckCredentials and ClientSettings.Check refuse the rest). Otherwise the key
// file's credentials, read by load (nil: LoadServiceAccountKey), and then Settings.Options. An
// error is prefixed with the name n gives the setting at fault (n.KeyFile or
// n.ImpersonateServiceAccount) and carries neither the path nor anything read from the file.
func (c Connection) Options(n SettingNames, scopes []string, load KeyLoader) ([]option.ClientOption, error) {
	if c.Emulator != "" {
		opts := EmulatorOptions(c.Emulator)
		if c.Settings.DisableTelemetry {
			opts = append(opts, option.WithTelemetryDisabled())
		}
		return opts, nil
	}
	var creds *auth.Credentials
	if c.KeyFile != "" {
		if load == nil {
			load = LoadServiceAccountKey
		}
		var err error
		if creds, err = load(c.KeyFile, scopes); err != nil {
			return nil, fmt.Errorf("%s: %w", n.KeyFile, err)
		}
	}
	opts, err := c.Settings.Options(scopes, creds)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.ImpersonateServiceAccount, err)
	}
	return opts, nil
}
