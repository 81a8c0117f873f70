package cloudtasksio

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// The package boundary. Every error that leaves the package, and every line it logs, starts
// with pkgPrefix exactly once, and this file is the only place that writes it. The errors built
// inside the package carry no prefix; it is added where an error crosses the boundary:
//
//   - at pipeline construction, by TryWrite, ConfigFromOptions (OptionError), NewQueue,
//     ParseQueue and FailedTask;
//   - on the worker, by the DoFn methods Beam calls (Setup, StartBundle, ProcessElement,
//     FinishBundle of writeFn, stageFn and stagedCreateFn), each of which returns its error
//     through withPrefix;
//   - in the log, by warnf, infof and debugf.
//
// The text a dead letter carries (deadletter.FailedElement.Error) is not an error of the
// package but the reason one element failed: it has no prefix. A test (boundary_test.go) fails
// when a string literal starting with the prefix appears in any other file.

// pkgPrefix starts every error and log line of the package.
const pkgPrefix = "cloudtasksio: "

// withPrefix returns err with the package prefix, unless its text starts with it already (an
// error that crossed the boundary once, or that another boundary of the package built). It
// wraps err, so errors.Is, errors.As and status.Code see through it. A nil err stays nil.
func withPrefix(err error) error {
	if err == nil || strings.HasPrefix(err.Error(), pkgPrefix) {
		return err
	}
	return &prefixedError{err: err}
}

// prefixedError is an error that crossed the package boundary.
type prefixedError struct{ err error }

func (e *prefixedError) Error() string { return pkgPrefix + e.err.Error() }
func (e *prefixedError) Unwrap() error { return e.err }

// prefixText is text with the package prefix, for an exported error type's Error method.
func prefixText(text string) string { return pkgPrefix + text }

// warnf logs a WARN line with the package prefix; the caller's file and line are reported.
func warnf(ctx context.Context, format string, args ...any) {
	log.Output(ctx, log.SevWarn, 1, pkgPrefix+fmt.Sprintf(format, args...))
}

// infof logs an INFO line with the package prefix; the caller's file and line are reported.
func infof(ctx context.Context, format string, args ...any) {
	log.Output(ctx, log.SevInfo, 1, pkgPrefix+fmt.Sprintf(format, args...))
}

// debugf logs a DEBUG line with the package prefix; the caller's file and line are reported.
func debugf(ctx context.Context, format string, args ...any) {
	log.Output(ctx, log.SevDebug, 1, pkgPrefix+fmt.Sprintf(format, args...))
}
