package cloudtasksio

import (
	"context"
	"errors"
	"hash/maphash"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// The whole text of a failure. Everywhere a failure is reported (a dead letter's Error, the
// WARN line of a drop, the error that fails a bundle) its text is cut to maxErrorText, so that
// one long error cannot swell every dead letter or flood the log. What was cut reaches the log
// once, at DEBUG level: an operator who needs it turns DEBUG lines on. The text is an error's,
// which the sink never builds from a payload or a credential.

// maxFullErrorText bounds the DEBUG line of a failure's whole text. It is far above any error
// the sink, the client or the service writes, and keeps a runaway error of user code (a
// Serializer, a QueueFn) from writing megabytes to the log.
const maxFullErrorText = 64 << 10

// maxFullTextsPerBundle bounds the distinct texts one bundle logs at DEBUG level.
const maxFullTextsPerBundle = 100

// fullTextSeed hashes the texts a bundle has logged.
var fullTextSeed = maphash.MakeSeed()

// fullErrorTexts logs the whole text of element failures at DEBUG level, once per bundle and
// distinct text. Its zero value is ready; reset starts a bundle.
type fullErrorTexts struct {
	seen map[uint64]bool // hashes of the texts logged in this bundle
}

// reset forgets the texts logged so far: a new bundle logs each again.
func (d *fullErrorTexts) reset() { clear(d.seen) }

// log logs text, the whole error of an element of queue that failed with code, unless this
// bundle has logged it already, or has logged maxFullTextsPerBundle texts.
func (d *fullErrorTexts) log(ctx context.Context, code, queue, text string) {
	h := maphash.String(fullTextSeed, text)
	if d.seen[h] || len(d.seen) >= maxFullTextsPerBundle {
		return
	}
	if d.seen == nil {
		d.seen = map[uint64]bool{}
	}
	d.seen[h] = true
	logFullText(ctx, "the failure ("+code+") of an element for queue "+queue, text)
}

// logFullText logs the whole text of a failure at DEBUG level.
func logFullText(ctx context.Context, what, text string) {
	debugf(ctx, "the whole text of %s (%d bytes): %s", what, len(text), boundedtext.Cut(text, maxFullErrorText))
}

// logCut logs, at DEBUG level, the whole text of a failure that fails the bundle when err's
// text was cut (a boundedError in its chain, longer than maxErrorText); what describes it. A
// failed bundle stops, so this is once per bundle without keeping count.
func logCut(ctx context.Context, what string, err error) {
	var be boundedError
	if errors.As(err, &be) {
		if full := be.err.Error(); len(full) > maxErrorText {
			logFullText(ctx, what, full)
		}
	}
}
