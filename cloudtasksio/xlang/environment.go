package xlang

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// This file holds the Go environment the expanded steps run in, the worker binary it stages
// and the artifact retrieval service through which callers fetch that binary, and the check
// of the caller's Beam version.

// The environment types the service answers with.
const (
	// EnvironmentExternal runs the Go workers in a worker pool (the service's own by default):
	// for local runners.
	EnvironmentExternal = "EXTERNAL"
	// EnvironmentDocker runs them in Beam's Go SDK container, which retrieves the staged
	// worker binary: for Dataflow.
	EnvironmentDocker = "DOCKER"
)

// DefaultContainerImage is the Go SDK container of the Beam release this module is built
// with, the default of a DOCKER environment.
var DefaultContainerImage = core.DefaultDockerImage

// workerBinary is the Go worker binary the environment stages: this program.
type workerBinary struct {
	Path   string
	SHA256 string
}

// newWorkerBinary reads the binary at path and computes its SHA-256.
func newWorkerBinary(path string) (workerBinary, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return workerBinary{}, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return workerBinary{}, fmt.Errorf("the worker binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return workerBinary{}, fmt.Errorf("the worker binary: %w", err)
	}
	return workerBinary{Path: abs, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// artifact is the binary as an environment dependency: a file in the Go worker binary role.
func (w workerBinary) artifact() *pipepb.ArtifactInformation {
	payload, _ := proto.Marshal(&pipepb.ArtifactFilePayload{Path: w.Path, Sha256: w.SHA256})
	return &pipepb.ArtifactInformation{TypeUrn: graphx.URNArtifactFileType, TypePayload: payload, RoleUrn: graphx.URNArtifactGoWorkerRole}
}

// environment builds the Go environment of the expanded steps.
func (s *Service) environment(ctx context.Context) (*pipepb.Environment, error) {
	urn := graphx.URNEnvExternal
	if s.opts.EnvironmentType == EnvironmentDocker {
		urn = graphx.URNEnvDocker
	}
	env, err := graphx.CreateEnvironment(ctx, urn, func(context.Context) string { return s.opts.EnvironmentConfig })
	if err != nil {
		return nil, err
	}
	env.Dependencies = []*pipepb.ArtifactInformation{s.worker.artifact()}
	return env, nil
}

// ResolveArtifacts answers the caller's request to resolve the environment's dependencies:
// the worker binary is a file already, so the answer is the request.
func (s *Service) ResolveArtifacts(_ context.Context, req *jobpb.ResolveArtifactsRequest) (*jobpb.ResolveArtifactsResponse, error) {
	for _, a := range req.GetArtifacts() {
		if _, err := s.servedPath(a); err != nil {
			return nil, err
		}
	}
	return &jobpb.ResolveArtifactsResponse{Replacements: req.GetArtifacts()}, nil
}

// artifactChunk is the size of the pieces GetArtifact streams.
const artifactChunk = 1 << 20

// GetArtifact streams the worker binary. Any other artifact is refused.
func (s *Service) GetArtifact(req *jobpb.GetArtifactRequest, stream jobpb.ArtifactRetrievalService_GetArtifactServer) error {
	path, err := s.servedPath(req.GetArtifact())
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return status.Errorf(codes.Internal, "opening the worker binary: %v", err)
	}
	defer f.Close()
	buf := make([]byte, artifactChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if err := stream.Send(&jobpb.GetArtifactResponse{Data: buf[:n]}); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return status.Errorf(codes.Internal, "reading the worker binary: %v", err)
		}
	}
}

// servedPath returns the path of an artifact the service serves: only the worker binary.
func (s *Service) servedPath(a *pipepb.ArtifactInformation) (string, error) {
	var payload pipepb.ArtifactFilePayload
	if a.GetTypeUrn() != graphx.URNArtifactFileType || proto.Unmarshal(a.GetTypePayload(), &payload) != nil {
		return "", status.Errorf(codes.InvalidArgument, "this expansion service serves only its Go worker binary, a file artifact; the request asks for an artifact of type %s", quoteName(a.GetTypeUrn()))
	}
	if payload.GetPath() != s.worker.Path {
		return "", status.Errorf(codes.PermissionDenied, "this expansion service serves only its Go worker binary; the request asks for another file")
	}
	return payload.GetPath(), nil
}

// sdkBaseVersion is the capability prefix through which an environment names its SDK's
// container image, whose tag is the SDK's Beam version.
const sdkBaseVersion = "beam:version:sdk_base:"

// beamVersionRE reads a release from an image tag: 2.77.0, 2.77.0rc1, 2.77.0.dev, 2.77.0-SNAPSHOT.
var beamVersionRE = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

// MinBeamVersion and MaxBeamMinor bound the Beam releases of the callers the service serves:
// from MinBeamVersion to the minor release of this module's Beam Go SDK (core.SdkVersion).
// The cross-language protocol is that of Beam 2; these are the releases CI runs.
const MinBeamVersion = "2.73.0"

// checkCallerVersion refuses a request whose SDK is of a Beam release the service does not
// serve. The SDK's release is read from its environments' capabilities; a request that names
// none is served.
func checkCallerVersion(c *pipepb.Components) error {
	minMajor, minMinor, _ := parseVersion(MinBeamVersion)
	maxMajor, maxMinor, _ := parseVersion(core.SdkVersion)
	for _, env := range c.GetEnvironments() {
		for _, capability := range env.GetCapabilities() {
			image, ok := strings.CutPrefix(capability, sdkBaseVersion)
			if !ok || strings.HasPrefix(image, "go:") {
				continue
			}
			tag := image[strings.LastIndexByte(image, ':')+1:]
			major, minor, ok := parseVersion(tag)
			if !ok {
				continue
			}
			if major != minMajor || minor < minMinor || major != maxMajor || minor > maxMinor {
				return configErr("the calling SDK (%s) is of Beam %s; this expansion service serves Beam %s to %d.%d.x "+
					"(its Go SDK is Beam %s): use a release in that range, or an expansion service built for yours",
					quoteName(image), quoteName(tag), MinBeamVersion, maxMajor, maxMinor, core.SdkVersion)
			}
		}
	}
	return nil
}

// parseVersion reads major and minor from a release such as 2.77.0.
func parseVersion(v string) (major, minor int, ok bool) {
	m := beamVersionRE.FindStringSubmatch(v)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}
