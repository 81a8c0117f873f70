package cloudtasksio

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Queue identifies a Cloud Tasks queue. Queues are regional, so the location is part of the
// identity. A Queue is plain data; the sink never creates or configures the queue itself.
type Queue struct{ Project, Location, Name string }

// NewQueue returns the queue projects/<project>/locations/<location>/queues/<name>, checking
// each part against the rules of Cloud Tasks resource names, so that a malformed queue fails
// where it is written instead of being answered INVALID_ARGUMENT for every task:
//   - project: a project id or number of letters, digits and hyphens, or the legacy
//     domain-scoped form "example.com:my-project" (dot-separated labels of letters, digits and
//     hyphens, a colon, then the id);
//   - location: lowercase letters, digits and hyphens, for example "us-central1";
//   - name: a queue id of letters, digits and hyphens, at most 100 characters.
//
// The error names the part at fault.
func NewQueue(project, location, name string) (Queue, error) {
	q := Queue{Project: project, Location: location, Name: name}
	if err := q.validate(); err != nil {
		return Queue{}, withPrefix(err)
	}
	return q, nil
}

// ParseQueue parses a queue resource name of the form
// "projects/<project>/locations/<location>/queues/<name>".
func ParseQueue(path string) (Queue, error) {
	parts := strings.Split(path, "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "queues" {
		return Queue{}, withPrefix(fmt.Errorf("queue path %s is not of the form projects/P/locations/L/queues/Q", boundedtext.Quote(path)))
	}
	return NewQueue(parts[1], parts[3], parts[5])
}

// Path returns the queue's resource name, "projects/P/locations/L/queues/Q".
func (q Queue) Path() string {
	return "projects/" + q.Project + "/locations/" + q.Location + "/queues/" + q.Name
}

// String returns Path().
func (q Queue) String() string { return q.Path() }

// IsZero reports whether q is the zero Queue (no fixed queue configured).
func (q Queue) IsZero() bool { return q == Queue{} }

// validate checks the three parts; the error names the part as "Queue.<Part>" and carries no
// package prefix.
func (q Queue) validate() error {
	if err := q.check(); err != nil {
		return errors.New(err.say(func(field string) string { return field }))
	}
	return nil
}

// check is validate as a field error about Queue.Project, Queue.Location or Queue.Name.
func (q Queue) check() *fieldError {
	for _, p := range []struct{ field, value, what, rule string }{
		{"Queue.Project", q.Project, "project id", projectRule},
		{"Queue.Location", q.Location, "location id", locationRule},
		{"Queue.Name", q.Name, "queue id", queueIDRule},
	} {
		switch {
		case strings.TrimSpace(p.value) == "":
			return errField(p.field, "is blank")
		case strings.ContainsAny(p.value, "/"):
			return errField(p.field, "%s contains '/'; it must be a %s (%s)", boundedtext.Quote(p.value), p.what, p.rule)
		case strings.IndexFunc(p.value, isSpace) >= 0:
			return errField(p.field, "%s contains whitespace; it must be a %s (%s)", boundedtext.Quote(p.value), p.what, p.rule)
		}
	}
	if len(q.Project) > maxProjectBytes || !validProject(q.Project) {
		return errField("Queue.Project", "%s must be a project id (%s)", boundedtext.Quote(q.Project), projectRule)
	}
	if len(q.Location) > maxLocationBytes || !allRunes(q.Location, isLocationRune) {
		return errField("Queue.Location", "%s must be a location id (%s)", boundedtext.Quote(q.Location), locationRule)
	}
	if len(q.Name) > maxQueueIDBytes || !allRunes(q.Name, isQueueIDRune) {
		return errField("Queue.Name", "%s must be a queue id (%s)", boundedtext.Quote(q.Name), queueIDRule)
	}
	return nil
}

// The rules of the three queue parts, as errors and docs state them.
const (
	projectRule  = `letters, digits and hyphens, or the legacy domain-scoped form "example.com:my-project"; at most 100`
	locationRule = "lowercase letters, digits and hyphens, for example us-central1; at most 63"
	queueIDRule  = "letters, digits and hyphens, at most 100"
)

// The longest part of a queue path the sink accepts: a queue id has at most 100 characters
// (the Cloud Tasks API); a project id, domain-scoped or not, fits in 100 (Google Cloud's
// limit, as gcpconn.ValidProject applies it); a location id is one DNS label (63).
const (
	maxProjectBytes  = 100
	maxLocationBytes = 63
	maxQueueIDBytes  = 100
)

// validProject accepts a project id (letters, digits, hyphens) optionally preceded by a
// domain and a colon, the form of projects created under a G Suite domain long ago.
//
// This is the Cloud Tasks API's own statement of the PROJECT_ID part of a queue name, and it
// is deliberately looser than gcpconn.ValidProject, the project-id rule of Google Cloud that
// the dead-letter topic and the quota project follow (lowercase, no trailing hyphen, project
// numbers): a queue path the Cloud Tasks service accepts must not be refused here, and the
// service answers for the rest.
func validProject(p string) bool {
	domain, id, scoped := strings.Cut(p, ":")
	if !scoped {
		return allRunes(p, isQueueIDRune)
	}
	if !allRunes(id, isQueueIDRune) {
		return false
	}
	for _, label := range strings.Split(domain, ".") {
		if !allRunes(label, isQueueIDRune) {
			return false
		}
	}
	return true
}

// allRunes reports whether s is non-empty and every rune of it satisfies ok.
func allRunes(s string, ok func(rune) bool) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return !ok(r) }) < 0
}

func isSpace(r rune) bool { return unicode.IsSpace(r) }

func isQueueIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
}

func isLocationRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-'
}

// TaskID returns the task id the sink uses for a deduplication key: the lowercase hex SHA-256
// digest of the key's UTF-8 bytes (64 characters). Hashing spreads ids evenly over the queue's
// key space, which Cloud Tasks needs to serve named tasks efficiently, whatever the keys look
// like. Use it to find the task created for a key: Queue.Path() + "/tasks/" + TaskID(key).
func TaskID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// taskName is the full resource name of the task with id TaskID(key) in q.
func taskName(q Queue, key string) string { return q.Path() + "/tasks/" + TaskID(key) }
