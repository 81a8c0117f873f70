package xlang

import (
	"context"
	"fmt"
	"runtime/debug"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Identifier names the transform: the schema transform's identifier, and the URN of the same
// transform expanded as a plain external transform.
const Identifier = "beam:schematransform:beam-cloudtasks:cloudtasks_write:v1"

// urnSchemaTransform is the URN of a schema transform's expansion request, whose payload is a
// SchemaTransformPayload.
const urnSchemaTransform = "beam:expansion:payload:schematransform:v1"

// Options configure a Service.
type Options struct {
	// EnvironmentType is the environment the expanded steps run in: EnvironmentExternal (the
	// default) or EnvironmentDocker.
	EnvironmentType string
	// EnvironmentConfig is, for EXTERNAL, the host:port of the worker pool that starts the Go
	// workers (required), and for DOCKER the container image (default DefaultContainerImage).
	EnvironmentConfig string
	// WorkerBinary is the path of the Go worker binary the environment stages: a program that
	// links this package, built for the workers' platform, normally the one serving. Required.
	WorkerBinary string
}

// Service is the expansion service of cloudtasksio.Write for Python, Java and YAML pipelines:
// Beam's ExpansionService (Expand, DiscoverSchemaTransform) and the ArtifactRetrievalService
// through which a caller fetches the Go worker binary. Register it on a gRPC server.
type Service struct {
	jobpb.UnimplementedExpansionServiceServer
	jobpb.UnimplementedArtifactRetrievalServiceServer

	opts   Options
	worker workerBinary
}

// NewService checks the options and reads the worker binary.
func NewService(opts Options) (*Service, error) {
	switch opts.EnvironmentType {
	case "":
		opts.EnvironmentType = EnvironmentExternal
	case EnvironmentExternal, EnvironmentDocker:
	default:
		return nil, fmt.Errorf("xlang: environment type %s is not served; accepted: %s, %s", quoteName(opts.EnvironmentType), EnvironmentExternal, EnvironmentDocker)
	}
	switch {
	case opts.EnvironmentType == EnvironmentExternal && opts.EnvironmentConfig == "":
		return nil, fmt.Errorf("xlang: an EXTERNAL environment needs the worker pool's host:port")
	case opts.EnvironmentType == EnvironmentDocker && opts.EnvironmentConfig == "":
		opts.EnvironmentConfig = DefaultContainerImage
	}
	if opts.WorkerBinary == "" {
		return nil, fmt.Errorf("xlang: the worker binary is required")
	}
	w, err := newWorkerBinary(opts.WorkerBinary)
	if err != nil {
		return nil, fmt.Errorf("xlang: %w", err)
	}
	return &Service{opts: opts, worker: w}, nil
}

// Register registers the expansion and artifact retrieval services on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	jobpb.RegisterExpansionServiceServer(r, s)
	jobpb.RegisterArtifactRetrievalServiceServer(r, s)
}

// DiscoverSchemaTransform lists the transform: its identifier, configuration schema (every
// field with its type and a one-line description), input and output.
func (s *Service) DiscoverSchemaTransform(context.Context, *jobpb.DiscoverSchemaTransformRequest) (*jobpb.DiscoverSchemaTransformResponse, error) {
	return &jobpb.DiscoverSchemaTransformResponse{SchemaTransformConfigs: map[string]*jobpb.SchemaTransformConfig{
		Identifier: {
			ConfigSchema:           configSchema(),
			InputPcollectionNames:  []string{"input"},
			OutputPcollectionNames: []string{defaultErrorOutput},
			Description: "Writes each input element as a Google Cloud Task with beam-cloudtasks' cloudtasksio.Write (Go): rows become " +
				"the JSON body (or another format), bytes the body as they are. Failed elements leave as error rows (element, msg, " +
				"stack, code, destination) under the output error_handling names, else under errors.",
		},
	}}, nil
}

// Expand expands the transform for a caller's pipeline. A bad request is answered with an
// error in the response, which the caller's SDK raises while it builds the pipeline.
func (s *Service) Expand(ctx context.Context, req *jobpb.ExpansionRequest) (resp *jobpb.ExpansionResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = &jobpb.ExpansionResponse{Error: fmt.Sprintf("cloudtasksio/xlang: expanding %s panicked: %s\n%s", Identifier,
				boundedtext.Sprint(r, 1024), boundedtext.Cut(string(debug.Stack()), 4096))}, nil
		}
	}()
	out, err := s.expand(ctx, req)
	if err != nil {
		return &jobpb.ExpansionResponse{Error: "cloudtasksio/xlang: " + Identifier + ": " + err.Error()}, nil
	}
	return out, nil
}

// requestParts is what the expansion reads from a request.
type requestParts struct {
	components *pipepb.Components
	inputs     map[string]string
	namespace  string
	uniqueName string
	spec       *pipepb.FunctionSpec
}

func (s *Service) expand(ctx context.Context, req *jobpb.ExpansionRequest) (*jobpb.ExpansionResponse, error) {
	parts := &requestParts{
		components: req.GetComponents(), inputs: req.GetTransform().GetInputs(), namespace: req.GetNamespace(),
		uniqueName: req.GetTransform().GetUniqueName(), spec: req.GetTransform().GetSpec(),
	}
	if parts.uniqueName == "" {
		parts.uniqueName = "CloudTasksWrite"
	}
	if err := checkCallerVersion(parts.components); err != nil {
		return nil, err
	}
	config, err := requestConfig(parts.spec)
	if err != nil {
		return nil, err
	}
	st, err := readSettings(config)
	if err != nil {
		return nil, err
	}
	in, err := readInput(parts)
	if err != nil {
		return nil, err
	}
	if err := checkMetadataFields(st, in); err != nil {
		return nil, err
	}
	plan, err := newWritePlan(st, in, parts.uniqueName)
	if err != nil {
		return nil, err
	}
	env, err := s.environment(ctx)
	if err != nil {
		return nil, err
	}
	return plan.expansion(parts, env)
}

// requestConfig decodes the transform's configuration from its spec: a schema transform
// payload for this identifier, or this identifier's URN with an external configuration
// payload (Beam YAML's implicit-schema form).
func requestConfig(spec *pipepb.FunctionSpec) (map[string]value, error) {
	switch spec.GetUrn() {
	case urnSchemaTransform:
		var p pipepb.SchemaTransformPayload
		if err := proto.Unmarshal(spec.GetPayload(), &p); err != nil {
			return nil, configErr("the schema transform payload cannot be read: %v", err)
		}
		if p.GetIdentifier() != Identifier {
			return nil, configErr("this expansion service serves the schema transform %s only, not %s", Identifier, quoteName(p.GetIdentifier()))
		}
		return configOf(p.GetConfigurationSchema(), p.GetConfigurationRow())
	case Identifier:
		var p pipepb.ExternalConfigurationPayload
		if err := proto.Unmarshal(spec.GetPayload(), &p); err != nil {
			return nil, configErr("the external configuration payload cannot be read: %v", err)
		}
		return configOf(p.GetSchema(), p.GetPayload())
	}
	return nil, configErr("this expansion service expands %s (as a schema transform or with that URN) only, not the URN %s", Identifier, quoteName(spec.GetUrn()))
}
