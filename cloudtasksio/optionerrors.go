package cloudtasksio

import (
	"fmt"
	"slices"
	"strings"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file holds the errors of ConfigFromOptions: OptionError, and how a rule of
// Config.validate that a parsed Config breaks is reported against the option key that set the
// field at fault, through the table's field lookup (rowsSetting).

// OptionError is the error ConfigFromOptions returns: it names the option key at fault and
// says what the key accepts. Reason never repeats a header value, a URL or a file path, so the
// error is safe to log.
type OptionError struct {
	// Key is the option key at fault, exactly as given (for example "sink.recovery.max-attempts"),
	// or a required key that is missing ("project", "location", "queue").
	Key string
	// Reason says what is wrong with the key or its value, and what is accepted.
	Reason string
}

// Error returns `cloudtasksio: option "<key>": <reason>`, with a long key cut short
// (boundedtext.Quote) and the reason cut to maxReasonBytes: neither repeats a huge input in
// full.
func (e *OptionError) Error() string {
	return prefixText("option " + boundedtext.Quote(e.Key) + ": " + boundedtext.Cut(e.Reason, maxReasonBytes))
}

// maxReasonBytes bounds the reason an OptionError prints.
const maxReasonBytes = 1024

// optErr is the OptionError of key with a formatted reason.
func optErr(key, format string, args ...any) *OptionError {
	return &OptionError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// optionError turns a field error of the parsed Config into an *OptionError for the key the
// table maps its field to, with the message naming every field by its key.
func (p *optionParser) optionError(fe *fieldError, cfg Config) *OptionError {
	key := p.blame(fe)
	reason := fe.say(optionKeyName)
	if r, _, _ := rowOf(key); !r.prefix && len(fe.entries) > 0 {
		// The error is about options of the format, but none was given (an option the format
		// requires): name their keys.
		reason += " (key " + prefixed(bodyOf(&cfg).Name+".", fe.entries) + ")"
	}
	return &OptionError{Key: key, Reason: reason}
}

// blame returns the key a field error names: the first given key that sets one of its fields,
// trying the fields in order and the rows of each in table order (for an error about entries,
// only a key of one of those entries). When no given key is about the entries (a format
// option the format requires), it names the first given key of the first field, else that
// field's first fixed key, else the field itself.
func (p *optionParser) blame(fe *fieldError) string {
	for _, field := range fe.fields {
		for _, r := range rowsSetting[field] {
			for _, k := range p.keysOf(r) {
				if entry, _ := strings.CutPrefix(k, r.key); len(fe.entries) == 0 || r.prefix && slices.Contains(fe.entries, entry) {
					return k
				}
			}
		}
	}
	rows := rowsSetting[fe.fields[0]]
	for _, r := range rows {
		if keys := p.keysOf(r); len(keys) > 0 {
			return keys[0]
		}
	}
	for _, r := range rows {
		if !r.prefix {
			return r.key
		}
	}
	return fe.fields[0]
}

// optionKeyName names a Config field by its option key in ConfigFromOptions' errors: the key
// of the one row that sets it, the shared start of several ("http.oidc.*"), or the prefix of
// a key family ("http.headers"). A field no key sets keeps its Go name.
func optionKeyName(field string) string {
	rows := rowsSetting[field]
	var keys []string
	for _, r := range rows {
		if !r.prefix {
			keys = append(keys, r.key)
		}
	}
	switch {
	case len(keys) == 1:
		return keys[0]
	case len(keys) > 1:
		common := keys[0]
		for _, k := range keys[1:] {
			for !strings.HasPrefix(k, common) {
				common = common[:strings.LastIndexByte(common, '.')+1]
			}
		}
		if common == "" {
			return strings.Join(keys, ", ")
		}
		return common + "*"
	case len(rows) > 0:
		return strings.TrimSuffix(rows[0].key, ".")
	}
	return goFieldName(field)
}

// prefixed returns the names, each after prefix, comma-separated.
func prefixed(prefix string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return strings.Join(out, ", ")
}
