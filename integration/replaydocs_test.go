package integration

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/replay/replay"
)

// lockedBuffer is a bytes.Buffer that log handlers on several goroutines may write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// replayDocsOutput returns the expected output of `go run ./examples/replay` that
// docs/dead-letters.md shows.
func replayDocsOutput(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/dead-letters.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(doc), "`go run ./examples/replay`, it publishes")
	require.True(t, ok, "the docs introduce the example's output")
	_, block, ok := strings.Cut(after, "```\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok)
	return strings.Split(strings.TrimSuffix(block, "\n"), "\n")
}

// timings are what differs from run to run in the example's output.
var timings = regexp.MustCompile(`in [0-9.]+m?s:|time=[^ ]+ `)

// TestTheReplayDocsShowWhatTheExamplePrints runs the replay example and checks that the
// output docs/dead-letters.md shows is what it prints, WARN line of the queue preflight
// included, and that from the first replay on the docs leave no line out.
func TestTheReplayDocsShowWhatTheExamplePrints(t *testing.T) {
	var logs lockedBuffer
	saved := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	t.Cleanup(func() { slog.SetDefault(saved) })
	ct := exampleCloudTasks(t, cloudtaskstest.WithoutDispatch())
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	var out bytes.Buffer
	_, err := replay.Demo(context.Background(), exampleEnv(ct, &out), ps.Addr)
	require.NoError(t, err)
	slog.SetDefault(saved)

	printed := timings.ReplaceAllString(out.String(), "")
	docs := replayDocsOutput(t)
	var warned bool
	for _, line := range docs {
		switch {
		case line == "...":
		case strings.Contains(line, "level=WARN"):
			_, msg, ok := strings.Cut(line, "msg=")
			require.True(t, ok, line)
			msg = strings.TrimPrefix(strings.Trim(msg, `"`), "[SDK] ")
			assert.Contains(t, logs.String(), msg, "the docs' WARN line is what the example logs")
			warned = true
		default:
			assert.Contains(t, printed, timings.ReplaceAllString(line, ""), "the docs show a line the example does not print")
		}
	}
	assert.True(t, warned, "the docs show the preflight's WARN line")
	_, replays, ok := strings.Cut(out.String(), "Replaying the dead letters")
	require.True(t, ok)
	shown := timings.ReplaceAllString(strings.Join(docs, "\n"), "")
	for _, line := range strings.Split(strings.TrimSpace("Replaying the dead letters"+replays), "\n") {
		assert.Contains(t, shown, timings.ReplaceAllString(line, ""), "a line the example prints that the docs leave out")
	}
}
