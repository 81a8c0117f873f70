package pubsubdl

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary"
)

// The package boundary. Every error that leaves the package, every line it logs and every
// panic of its own starts with pkgPrefix exactly once, and this file is the only place that
// writes it. The errors built inside the package carry no prefix; it is added where an error
// crosses the boundary:
//
//   - at pipeline construction, by TryToPubSub (whose error ToPubSub panics with) and
//     ConfigError.Error;
//   - in a dead letter's consumer, by FromMessage;
//   - on the worker, by the DoFn methods Beam calls (StartBundle, ProcessElement and
//     FinishBundle of publishFn), each of which returns its error through withPrefix;
//   - in the log, by infof, and in an internal error's panic, by prefixText.
//
// deadletter.TryToPubSub passes the errors of TryToPubSub on as they are. A test
// (boundary_test.go) fails when a string literal starting with the prefix appears in any other
// file.

// pkgPrefix starts every error and log line of the package.
const pkgPrefix boundary.Prefix = "pubsubdl: "

// withPrefix returns err with the package prefix, once (boundary.Prefix.Wrap): errors.Is,
// errors.As and status.Code see through it. A *ConfigError has the prefix already. A nil err
// stays nil.
func withPrefix(err error) error { return pkgPrefix.Wrap(err) }

// prefixText is text with the package prefix, for an exported error type's Error method and
// the text of a panic.
func prefixText(text string) string { return pkgPrefix.Text(text) }

// infof logs an INFO line with the package prefix; the caller's file and line are reported.
func infof(ctx context.Context, format string, args ...any) {
	log.Output(ctx, log.SevInfo, 1, pkgPrefix.Text(fmt.Sprintf(format, args...)))
}
