package xlang

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"testing"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// serve starts the test service on a loopback port and returns a client connection to it.
func serve(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	testService(t).Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// fetch reads a whole artifact from the retrieval service.
func fetch(t *testing.T, c jobpb.ArtifactRetrievalServiceClient, a *pipepb.ArtifactInformation) ([]byte, error) {
	t.Helper()
	stream, err := c.GetArtifact(context.Background(), &jobpb.GetArtifactRequest{Artifact: a})
	require.NoError(t, err)
	var data []byte
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		data = append(data, chunk.GetData()...)
	}
}

func TestTheServiceServesItsWorkerBinaryAndNothingElse(t *testing.T) {
	c := jobpb.NewArtifactRetrievalServiceClient(serve(t))
	bin := testService(t).worker.artifact()

	resolved, err := c.ResolveArtifacts(context.Background(), &jobpb.ResolveArtifactsRequest{Artifacts: []*pipepb.ArtifactInformation{bin}})
	require.NoError(t, err)
	require.Len(t, resolved.GetReplacements(), 1)
	assert.True(t, proto.Equal(bin, resolved.GetReplacements()[0]), "the binary is a file already")

	data, err := fetch(t, c, bin)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	assert.Equal(t, testService(t).worker.SHA256, hex.EncodeToString(sum[:]), "the streamed binary is the one the environment names")

	other, err := proto.Marshal(&pipepb.ArtifactFilePayload{Path: "/etc/passwd"})
	require.NoError(t, err)
	_, err = fetch(t, c, &pipepb.ArtifactInformation{TypeUrn: bin.GetTypeUrn(), TypePayload: other})
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	assert.NotContains(t, err.Error(), "/etc/passwd", "the refused path is not repeated")

	_, err = fetch(t, c, &pipepb.ArtifactInformation{TypeUrn: "beam:artifact:type:url:v1"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = c.ResolveArtifacts(context.Background(), &jobpb.ResolveArtifactsRequest{Artifacts: []*pipepb.ArtifactInformation{{TypeUrn: bin.GetTypeUrn(), TypePayload: other}}})
	assert.Equal(t, codes.PermissionDenied, status.Code(err))
}

func TestTheExpansionServiceAnswersOverGRPC(t *testing.T) {
	c := jobpb.NewExpansionServiceClient(serve(t))
	resp, err := c.Expand(context.Background(), newRequest(t, rowCoder(t, orderSchema()), baseConfig()).req)
	require.NoError(t, err)
	assert.Empty(t, resp.GetError())
	disc, err := c.DiscoverSchemaTransform(context.Background(), &jobpb.DiscoverSchemaTransformRequest{})
	require.NoError(t, err)
	assert.Contains(t, disc.GetSchemaTransformConfigs(), Identifier)
}

func TestADockerEnvironmentNamesTheGoSDKContainer(t *testing.T) {
	s, err := NewService(Options{EnvironmentType: EnvironmentDocker, WorkerBinary: testService(t).worker.Path})
	require.NoError(t, err)
	resp, err := s.Expand(context.Background(), newRequest(t, rowCoder(t, orderSchema()), baseConfig()).req)
	require.NoError(t, err)
	require.Empty(t, resp.GetError())
	for _, env := range resp.GetComponents().GetEnvironments() {
		var docker pipepb.DockerPayload
		require.NoError(t, proto.Unmarshal(env.GetPayload(), &docker))
		assert.Equal(t, "beam:env:docker:v1", env.GetUrn())
		assert.Equal(t, DefaultContainerImage, docker.GetContainerImage())
		assert.Regexp(t, `^apache/beam_go_sdk:2\.77\.`, docker.GetContainerImage())
	}
	_, err = NewService(Options{EnvironmentType: "PROCESS", WorkerBinary: testService(t).worker.Path})
	assert.ErrorContains(t, err, `environment type "PROCESS" is not served`)
	_, err = NewService(Options{WorkerBinary: testService(t).worker.Path})
	assert.ErrorContains(t, err, "worker pool")
}
