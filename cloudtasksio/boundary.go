package cloudtasksio

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary"
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
// when a string literal starting with the prefix, or with the exactly-once label
// (stagedLabel), appears in any other file.

// pkgPrefix starts every error and log line of the package.
const pkgPrefix boundary.Prefix = "cloudtasksio: "

// withPrefix returns err with the package prefix, once (boundary.Prefix.Wrap): an error that
// crossed the boundary once, or that another boundary of the package built, is not prefixed
// again. errors.Is, errors.As and status.Code see through it. A nil err stays nil.
func withPrefix(err error) error { return pkgPrefix.Wrap(err) }

// prefixText is text with the package prefix, for an exported error type's Error method.
func prefixText(text string) string { return pkgPrefix.Text(text) }

// stagedLabel follows the package prefix on the errors and log lines that concern
// exactly-once delivery alone ("cloudtasksio: exactly-once: a staged task ..."). It is written
// here only: errors get it from stagedErrorf, and the few log lines about exactly-once
// delivery add this constant to their format. Other errors of the exactly-once steps (a
// configuration refused on the worker, a create failure the engine reports) have no label.
const stagedLabel = "exactly-once: "

// stagedErrorf is fmt.Errorf for an error of exactly-once delivery: the text starts with
// stagedLabel, once.
func stagedErrorf(format string, args ...any) error {
	return boundary.Prefix(stagedLabel).Wrap(fmt.Errorf(format, args...))
}

// warnf logs a WARN line with the package prefix; the caller's file and line are reported.
func warnf(ctx context.Context, format string, args ...any) {
	log.Output(ctx, log.SevWarn, 1, pkgPrefix.Text(fmt.Sprintf(format, args...)))
}

// infof logs an INFO line with the package prefix; the caller's file and line are reported.
func infof(ctx context.Context, format string, args ...any) {
	log.Output(ctx, log.SevInfo, 1, pkgPrefix.Text(fmt.Sprintf(format, args...)))
}

// debugf logs a DEBUG line with the package prefix; the caller's file and line are reported.
func debugf(ctx context.Context, format string, args ...any) {
	log.Output(ctx, log.SevDebug, 1, pkgPrefix.Text(fmt.Sprintf(format, args...)))
}
