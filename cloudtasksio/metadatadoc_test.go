package cloudtasksio_test

import (
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// The construction errors docs/metadata.md shows are the real ones, whole: each is what
// TryWrite returns for a type Job that breaks the rule, with this package's name for main.
func TestMetadataDocShowsTheRealErrors(t *testing.T) {
	httpTarget := &cloudtasksio.HTTPTarget{URL: "https://example.com/", Body: formats.JSON()}
	appEngine := &cloudtasksio.AppEngineTarget{RelativeURI: "/jobs", Body: formats.JSON()}
	tryWrite := func(cfg cloudtasksio.Config, elem any) string {
		t.Helper()
		cfg.Queue = testQueue
		_, s := beam.NewPipelineWithRoot()
		_, err := cloudtasksio.TryWrite(s, cfg, beam.Create(s, elem))
		require.Error(t, err)
		return strings.ReplaceAll(err.Error(), "cloudtasksio_test.Job", "main.Job")
	}
	var got []string
	func() {
		type Job struct {
			ID     string `json:"id"`
			Target string `cloudtasks:"url"`
		}
		got = append(got, tryWrite(cloudtasksio.Config{AppEngine: appEngine}, Job{}))
	}()
	func() {
		type Job struct {
			ID   string `json:"id"`
			When int64  `cloudtasks:"schedule-time"`
		}
		got = append(got, tryWrite(cloudtasksio.Config{HTTP: httpTarget}, Job{}))
	}()
	func() {
		type Job struct {
			ID    string `json:"id"`
			Route string `cloudtasks:"uri"`
		}
		got = append(got, tryWrite(cloudtasksio.Config{HTTP: httpTarget}, Job{}))
	}()
	func() {
		type Job struct {
			ID string `json:"id"`
			A  string `cloudtasks:"url"`
			B  string `cloudtasks:"url"`
		}
		got = append(got, tryWrite(cloudtasksio.Config{HTTP: httpTarget}, Job{}))
	}()
	func() {
		type Job struct {
			ID     string `json:"id"`
			secret string `cloudtasks:"task-id"`
		}
		got = append(got, tryWrite(cloudtasksio.Config{HTTP: httpTarget}, Job{secret: "k"}))
	}()

	// The page's error examples: the lines of its plain code blocks that start like one.
	var shown []string
	inBlock, plain := false, false
	for _, line := range strings.Split(readFile(t, "../docs/metadata.md"), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock, plain = !inBlock, line == "```"
		case inBlock && plain && strings.HasPrefix(line, "cloudtasksio: "):
			shown = append(shown, line)
		}
	}
	assert.Equal(t, got, shown, "docs/metadata.md's error examples, in this order, are the errors TryWrite returns")
}
