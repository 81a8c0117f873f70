package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/xlang"
)

// runAsCommand makes this test binary the command when the tests start it as one.
const runAsCommand = "CLOUDTASKS_EXPANSION_SERVICE_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsCommand) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// command returns this test binary run as the command with args, its temporary folder (where
// the worker pool keeps its workers' folders) a fresh one.
func command(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	tmp := t.TempDir()
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), runAsCommand+"=1", "TMPDIR="+tmp)
	return cmd, tmp
}

func TestTheServiceSaysWhereItServesAndStopsCleanly(t *testing.T) {
	cmd, tmp := command(t, "--port", "0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(time.Minute):
		t.Fatalf("the service printed no address within a minute; stderr:\n%s", stderr.String())
	}
	m := regexp.MustCompile(`serving \S+ on (127\.0\.0\.1:\d+) \(environment EXTERNAL (127\.0\.0\.1:\d+), pid \d+\)`).FindStringSubmatch(line)
	require.NotNil(t, m, "the line it printed: %q", line)
	assert.Contains(t, line, xlang.Identifier)

	cc, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	disc, err := jobpb.NewExpansionServiceClient(cc).DiscoverSchemaTransform(ctx, &jobpb.DiscoverSchemaTransformRequest{})
	require.NoError(t, err)
	assert.Contains(t, disc.GetSchemaTransformConfigs(), xlang.Identifier)

	pools, err := filepath.Glob(filepath.Join(tmp, "cloudtasks-expansion-service-workers-*"))
	require.NoError(t, err)
	assert.Len(t, pools, 1, "the worker pool's folder")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "SIGTERM stops the service cleanly; stderr:\n%s", stderr.String())
	pools, err = filepath.Glob(filepath.Join(tmp, "cloudtasks-expansion-service-workers-*"))
	require.NoError(t, err)
	assert.Empty(t, pools, "the pool's folder is removed when the service stops")
}

func TestBadFlagsAreRefusedNamingTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--environment=process"}, `--environment="process": accepted: external, docker`},
		{[]string{"--container_image=x"}, "--container_image applies to --environment=docker"},
		{[]string{"--environment=docker", "--worker_pool=127.0.0.1:9"}, "--worker_pool applies to --environment=external"},
		{[]string{"--worker_binary=/no/such/file", "--worker_pool=127.0.0.1:9"}, "the worker binary: open /no/such/file"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
	} {
		cmd, _ := command(t, c.args...)
		out, err := cmd.CombinedOutput()
		assert.Error(t, err, "%v", c.args)
		assert.Contains(t, strings.ReplaceAll(string(out), `\"`, `"`), c.says, "%v", c.args)
	}
}
