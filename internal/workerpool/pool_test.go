package workerpool

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/artifact"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// file is a retrieved artifact named name with the given role.
func file(t *testing.T, name, role string) *pipepb.ArtifactInformation {
	payload, err := proto.Marshal(&pipepb.ArtifactFilePayload{Path: name})
	require.NoError(t, err)
	return &pipepb.ArtifactInformation{TypeUrn: artifact.URNFileArtifact, TypePayload: payload, RoleUrn: role}
}

func TestTheWorkerBinaryIsPickedAsBeamsBootProgramDoes(t *testing.T) {
	other := "beam:artifact:role:staging_to:v1"
	cases := map[string]struct {
		files []*pipepb.ArtifactInformation
		want  string
		err   string
	}{
		"the Go worker role wins":     {files: []*pipepb.ArtifactInformation{file(t, "a.jar", other), file(t, "1-pipeline", artifact.URNGoWorkerBinaryRole)}, want: "1-pipeline"},
		"a single file is the binary": {files: []*pipepb.ArtifactInformation{file(t, "1-pipeline", other)}, want: "1-pipeline"},
		"else the one named worker":   {files: []*pipepb.ArtifactInformation{file(t, "a.jar", other), file(t, "worker", other)}, want: "worker"},
		"nothing staged":              {err: "--worker_binary"},
		"no binary among several":     {files: []*pipepb.ArtifactInformation{file(t, "a.jar", other), file(t, "b.jar", other)}, err: "none of the 2 staged files"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := WorkerBinary(c.files)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestAStartWithoutItsEndpointsIsAnsweredWithAnError(t *testing.T) {
	p := New(Options{Dir: t.TempDir(), Logf: t.Logf})
	resp, err := p.StartWorker(context.Background(), &fnpb.StartWorkerRequest{WorkerId: "w1"})
	require.NoError(t, err, "failures are answered in the response, not as an RPC error")
	assert.Contains(t, resp.GetError(), `worker "w1"`)
	assert.Contains(t, resp.GetError(), "endpoint")

	resp, err = p.StartWorker(context.Background(), &fnpb.StartWorkerRequest{})
	require.NoError(t, err)
	assert.Contains(t, resp.GetError(), "no worker id")
}

func TestStoppingAWorkerThePoolNeverStartedIsAnsweredWithAnError(t *testing.T) {
	p := New(Options{Dir: t.TempDir(), Logf: t.Logf})
	resp, err := p.StopWorker(context.Background(), &fnpb.StopWorkerRequest{WorkerId: "w9"})
	require.NoError(t, err)
	assert.Contains(t, resp.GetError(), `no worker "w9"`)
}

// provisioner is a runner's provision service on loopback that answers every worker with the
// same pipeline options.
type provisioner struct {
	fnpb.UnimplementedProvisionServiceServer
	addr string
}

func newProvisioner(t *testing.T) *provisioner {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	p := &provisioner{addr: lis.Addr().String()}
	fnpb.RegisterProvisionServiceServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return p
}

func (p *provisioner) GetProvisionInfo(context.Context, *fnpb.GetProvisionInfoRequest) (*fnpb.GetProvisionInfoResponse, error) {
	opts, err := structpb.NewStruct(map[string]any{"beam:option:job_name:v1": "test"})
	if err != nil {
		return nil, err
	}
	return &fnpb.GetProvisionInfoResponse{Info: &fnpb.ProvisionInfo{PipelineOptions: opts}}, nil
}

// startRequest asks for worker id with every endpoint at the provisioner (the fake worker
// never dials the others).
func (p *provisioner) startRequest(id string) *fnpb.StartWorkerRequest {
	ep := &pipepb.ApiServiceDescriptor{Url: p.addr}
	return &fnpb.StartWorkerRequest{WorkerId: id, ControlEndpoint: ep, LoggingEndpoint: ep, ProvisionEndpoint: ep, ArtifactEndpoint: ep}
}

// fakeWorker writes a shell script that stands for a Go worker binary: it prints its worker
// id, then runs body.
func fakeWorker(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "worker")
	script := "#!/bin/sh\nfor a in \"$@\"; do case $a in --id=*) echo \"started ${a#--id=}\" >&2;; esac; done\n" + body + "\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

// syncBuffer is an io.Writer that tests read while workers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond for up to ten seconds: the pool's workers are real processes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAWorkerIdStartedBeforeIsStartedAgain is the Python FnApiRunner's use: it numbers the
// workers of each job from worker_0 and never stops them, so the next job asks for worker_0
// again while the first job's worker may still be there. Beam's Go pool (and this pool until
// it was fixed) answered "already exists" and the second job never got a worker.
func TestAWorkerIdStartedBeforeIsStartedAgain(t *testing.T) {
	prov := newProvisioner(t)
	out := &syncBuffer{}
	p := New(Options{Dir: t.TempDir(), Binary: fakeWorker(t, "exec sleep 30"), Output: out, Logf: t.Logf})
	t.Cleanup(p.Stop)

	for range 2 {
		resp, err := p.StartWorker(context.Background(), prov.startRequest("worker_0"))
		require.NoError(t, err)
		require.Empty(t, resp.GetError())
	}
	waitFor(t, "both workers wrote their start", func() bool { return strings.Count(out.String(), "started worker_0") == 2 })
	assert.Equal(t, []string{"worker_0", "worker_0"}, p.Running())

	resp, err := p.StopWorker(context.Background(), &fnpb.StopWorkerRequest{WorkerId: "worker_0"})
	require.NoError(t, err)
	assert.Empty(t, resp.GetError())
	waitFor(t, "StopWorker stopped both processes", func() bool { return len(p.Running()) == 0 })
}

func TestAWorkerWhoseHarnessFinishedIsStopped(t *testing.T) {
	prov := newProvisioner(t)
	out := &syncBuffer{}
	// Beam's Go harness prints this line when the runner closes the control stream, then
	// sleeps until it is killed.
	p := New(Options{Dir: t.TempDir(), Binary: fakeWorker(t, "echo '"+HarnessFinished+"' >&2; exec sleep 30"), Output: out, Logf: t.Logf})
	t.Cleanup(p.Stop)

	resp, err := p.StartWorker(context.Background(), prov.startRequest("w1"))
	require.NoError(t, err)
	require.Empty(t, resp.GetError())
	waitFor(t, "the finished worker was stopped", func() bool { return len(p.Running()) == 0 })
	assert.Contains(t, out.String(), HarnessFinished, "the worker's output reaches the pool's")
}

func TestAWorkerGetsThePipelineOptionsInAFileOfItsFolder(t *testing.T) {
	prov := newProvisioner(t)
	out := &syncBuffer{}
	p := New(Options{Dir: t.TempDir(), Binary: fakeWorker(t, `cat "$PIPELINE_OPTIONS_FILE" >&2; echo >&2; pwd >&2`), Output: out, Logf: t.Logf})
	t.Cleanup(p.Stop)

	resp, err := p.StartWorker(context.Background(), prov.startRequest("w1"))
	require.NoError(t, err)
	require.Empty(t, resp.GetError())
	waitFor(t, "the worker exited", func() bool { return strings.Contains(out.String(), "worker-") && len(p.Running()) == 0 })
	assert.Contains(t, out.String(), `"beam:option:job_name:v1":"test"`)
	entries, err := os.ReadDir(p.opts.Dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the worker's folder is removed when it exits")
}
