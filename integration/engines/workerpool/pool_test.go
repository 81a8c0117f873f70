package main

import (
	"context"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/artifact"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

func TestThePoolListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		lis, err := listenLoopback(addr)
		if addr == "[::1]:0" && err != nil {
			t.Logf("no IPv6 loopback here: %v", err)
			continue
		}
		require.NoError(t, err, addr)
		lis.Close()
	}
	for _, addr := range []string{"", ":0", "0.0.0.0:0", "192.0.2.1:0", "example.com:0", "127.0.0.1"} {
		_, err := listenLoopback(addr)
		require.Error(t, err, "%q", addr)
		assert.Contains(t, err.Error(), "-addr", "%q: the error names the flag", addr)
	}
}

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
			got, err := workerBinary(c.files)
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
	p := newPool(t.TempDir())
	resp, err := p.StartWorker(context.Background(), &fnpb.StartWorkerRequest{WorkerId: "w1"})
	require.NoError(t, err, "failures are answered in the response, not as an RPC error")
	assert.Contains(t, resp.GetError(), `worker "w1"`)
	assert.Contains(t, resp.GetError(), "endpoint")

	resp, err = p.StartWorker(context.Background(), &fnpb.StartWorkerRequest{})
	require.NoError(t, err)
	assert.Contains(t, resp.GetError(), "no worker id")
}

func TestStoppingAWorkerThePoolNeverStartedIsAnsweredWithAnError(t *testing.T) {
	p := newPool(t.TempDir())
	resp, err := p.StopWorker(context.Background(), &fnpb.StopWorkerRequest{WorkerId: "w9"})
	require.NoError(t, err)
	assert.Contains(t, resp.GetError(), `no worker "w9"`)
}
