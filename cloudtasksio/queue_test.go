package cloudtasksio

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseQueueRoundTrips(t *testing.T) {
	q, err := ParseQueue("projects/my-project/locations/asia-northeast1/queues/webhooks")
	require.NoError(t, err)
	assert.Equal(t, Queue{Project: "my-project", Location: "asia-northeast1", Name: "webhooks"}, q)
	assert.Equal(t, "projects/my-project/locations/asia-northeast1/queues/webhooks", q.Path())
}

func TestParseQueueRejectsMalformedPaths(t *testing.T) {
	for _, path := range []string{
		"",
		"projects/p/locations/l/queues",
		"projects/p/locations/l/queues/q/tasks/t",
		"project/p/locations/l/queues/q",
		"projects/p/location/l/queues/q",
		"projects/p/locations/l/queue/q",
		"projects//locations/l/queues/q",
		"projects/p/locations/ /queues/q",
		"projects/p/locations/l/queues/q_underscore",
		"projects/p/locations/l/queues/" + strings.Repeat("q", 101),
		"projects/p q/locations/l/queues/q",
	} {
		_, err := ParseQueue(path)
		assert.Error(t, err, path)
	}
}

func TestNewQueueNamesTheBadPart(t *testing.T) {
	_, err := NewQueue("p", " ", "q")
	require.ErrorContains(t, err, "Queue.Location is blank")
	_, err = NewQueue("p/x", "l", "q")
	require.ErrorContains(t, err, "Queue.Project")
	_, err = NewQueue("p", "l", " q")
	require.ErrorContains(t, err, "Queue.Name")
}

func TestTaskIDIsTheHexSHA256OfTheKey(t *testing.T) {
	// sha256("order-42"), computed independently with sha256sum.
	assert.Equal(t, "3bf8b157c4238eefe5ae4a66eca81c6b887d4dcedb58dd674271859f4dc2edfd", TaskID("order-42"))
	id := TaskID("order-42")
	assert.Len(t, id, 64)
	assert.Equal(t, strings.ToLower(id), id)
	assert.NotEqual(t, id, TaskID("order-43"))
	assert.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", TaskID(""))
}

func FuzzParseQueue(f *testing.F) {
	f.Add("projects/p/locations/l/queues/q")
	f.Add("projects/p/locations/l/queues/")
	f.Add("projects/a b/locations/l/queues/q")
	f.Fuzz(func(t *testing.T, path string) {
		q, err := ParseQueue(path)
		if err != nil {
			return
		}
		if q.Path() != path {
			t.Fatalf("ParseQueue(%q).Path() = %q", path, q.Path())
		}
		if _, err := NewQueue(q.Project, q.Location, q.Name); err != nil {
			t.Fatalf("parsed queue %q does not validate: %v", path, err)
		}
	})
}

// queueParts are queue parts the API accepts and parts it rejects, by the rules of its
// resource names: a project id of letters, digits and hyphens (or the legacy domain-scoped
// "example.com:my-project"), a location of lowercase letters, digits and hyphens, a queue id
// of letters, digits and hyphens of at most 100 characters.
var queueParts = struct {
	goodProjects, badProjects, goodLocations, badLocations []string
}{
	goodProjects:  []string{"my-project", "123456789012", "MyProject", "example.com:my-project", "a.b-c.example:p-1"},
	badProjects:   []string{"my_project", "my.project", "example.com:", ":my-project", "a:b:c", "exa_mple.com:p", "example..com:p", "p!", "proj\u00e9t"},
	goodLocations: []string{"us-central1", "asia-northeast1", "l"},
	badLocations:  []string{"us_central1", "US-CENTRAL1", "us.central1", "us-central1!"},
}

func TestQueuePartsFollowTheAPIRules(t *testing.T) {
	for _, p := range queueParts.goodProjects {
		_, err := NewQueue(p, "l", "q")
		assert.NoError(t, err, p)
		_, err = ParseQueue("projects/" + p + "/locations/l/queues/q")
		assert.NoError(t, err, p)
	}
	for _, p := range queueParts.badProjects {
		_, err := NewQueue(p, "l", "q")
		assert.ErrorContains(t, err, "Queue.Project", p)
		_, err = ParseQueue("projects/" + p + "/locations/l/queues/q")
		assert.ErrorContains(t, err, "Queue.Project", p)
	}
	for _, l := range queueParts.goodLocations {
		_, err := NewQueue("p", l, "q")
		assert.NoError(t, err, l)
	}
	for _, l := range queueParts.badLocations {
		_, err := NewQueue("p", l, "q")
		assert.ErrorContains(t, err, "Queue.Location", l)
		_, err = ParseQueue("projects/p/locations/" + l + "/queues/q")
		assert.ErrorContains(t, err, "Queue.Location", l)
	}
}

func TestConfigQueueAndOptionKeysApplyTheQueueRules(t *testing.T) {
	target := &HTTPTarget{URL: "https://example.com/"}
	for _, q := range []Queue{{Project: "my_project", Location: "l", Name: "q"}, {Project: "p", Location: "us_central1", Name: "q"}} {
		_, err := compile(Config{Queue: q, HTTP: target}, typeOf(eoPlainOrder{}))
		assert.ErrorContains(t, err, "Config.Queue", q.Path())
	}
	for key, value := range map[string]string{"project": "my_project", "location": "us_central1"} {
		opts := map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/"}
		opts[key] = value
		_, err := ConfigFromOptions(opts)
		var oe *OptionError
		require.ErrorAs(t, err, &oe, key)
		assert.Equal(t, key, oe.Key)
	}
}
