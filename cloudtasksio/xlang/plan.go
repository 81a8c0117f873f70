package xlang

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file builds the Go graph of one expansion (a placeholder for the caller's input, the
// step that makes task elements, cloudtasksio.Write, the error rows) and turns it into the
// expansion's answer: the placeholder cut off, the steps connected to the caller's input, and
// every id put in the request's namespace.

// The Go graph's two top-level scopes.
const (
	placeholderScope = "placeholder"
	writeScope       = "CloudTasksWrite"
	errorRowsScope   = "ErrorRows"
)

// The error row's fields, in order.
const (
	errorFieldElement = iota
	errorFieldMsg
	errorFieldStack
	errorFieldCode
	errorFieldDestination
)

// unnamedExpansions counts the expansions whose request had no namespace.
var unnamedExpansions atomic.Int64

// writePlan is one expansion's checked configuration.
type writePlan struct {
	st  settings
	in  input
	cfg cloudtasksio.Config
	// body is how a row becomes the body (rows only; the sink sends it raw).
	body formats.Format
	// errorType is the error row's Go type.
	errorType reflect.Type
	step      string
}

func newWritePlan(st settings, in input, step string) (*writePlan, error) {
	opts := maps.Clone(st.options)
	format := strings.ToLower(opts[fieldFormat])
	switch {
	case format == "" && in.Rows:
		format = formats.NameJSON
	case format == "":
		format = formats.NameRaw
	case !in.Rows && format != formats.NameRaw && format != formats.NameJSON:
		return nil, configErr("field %s is %s, which encodes rows, but the input is bytes, which are sent as they are: leave %s out, or set it to raw (or json for bytes that hold JSON)",
			fieldFormat, boundedtext.Quote(format), fieldFormat)
	}
	opts[fieldFormat] = format
	cfg, err := cloudtasksio.ConfigFromOptions(opts)
	if err != nil {
		return nil, optionsError(err)
	}
	if cfg.Delivery == cloudtasksio.ExactlyOnce && st.onFailure != onFailureFail {
		return nil, configErr("field sink_delivery_guarantee is exactly-once, where every failure fails the bundle, but %s is %s: leave %s and %s out",
			fieldOnFailure, st.onFailure, fieldOnFailure, fieldErrorHandling)
	}
	p := &writePlan{st: st, in: in, cfg: cfg, step: step}
	if err := p.setBody(); err != nil {
		return nil, err
	}
	switch st.onFailure {
	case onFailureLogAndDrop:
		p.cfg.OnFailure = cloudtasksio.LogAndDrop
	case onFailureDeadLetter:
		p.cfg.OnFailure = cloudtasksio.DeadLetter
	}
	if st.taskIDField != "" {
		p.cfg.TaskIDFn = httpTaskKey
		if p.cfg.AppEngine != nil {
			p.cfg.TaskIDFn = appEngineTaskKey
		}
	}
	if p.cfg.HTTP != nil && p.cfg.HTTP.URL == "" && st.urlField == "" {
		return nil, configErr("field http_url is required unless %s names the input field that holds each task's URL", fieldURL)
	}
	if p.errorType, err = errorRowType(in); err != nil {
		return nil, err
	}
	return p, nil
}

// setBody checks the body format against the input, moves it to the step that makes the task
// elements (the sink sends their body raw), and sets the Content-Type the format sends.
func (p *writePlan) setBody() error {
	var body *formats.Format
	var headers *map[string]string
	headersField := "http_headers"
	if p.cfg.AppEngine != nil {
		body, headers, headersField = &p.cfg.AppEngine.Body, &p.cfg.AppEngine.Headers, "app_engine_headers"
	} else {
		body, headers = &p.cfg.HTTP.Body, &p.cfg.HTTP.Headers
	}
	p.body = *body
	*body = formats.Raw()
	if !p.in.Rows {
		return nil
	}
	s, err := bodyformat.NewSchema(jsonTagged(p.in.RowType))
	if err != nil {
		return configErr("the input rows cannot be a task body: %v", err)
	}
	enc, err := bodyformat.NewEncoder(p.body, s)
	if err != nil {
		return configErr("field %s (%s) cannot encode the input rows: %v", fieldFormat, p.body.Name, err)
	}
	name, value := "", ""
	for k, v := range *headers {
		if strings.EqualFold(k, "Content-Type") {
			name, value = k, v
		}
	}
	switch owned := enc.ContentType(); {
	case owned != "" && name != "" && !bodyformat.ContentTypeMatches(owned, value):
		return configErr("field %s: its Content-Type conflicts with format %s, which sends %s", headersField, p.body.Name, owned)
	case owned != "":
		delete(*headers, name)
		*headers = setHeader(*headers, "Content-Type", owned)
	case name == "" && enc.DefaultContentType() != "":
		*headers = setHeader(*headers, "Content-Type", enc.DefaultContentType())
	}
	return nil
}

func setHeader(h map[string]string, name, value string) map[string]string {
	if h == nil {
		h = map[string]string{}
	}
	h[name] = value
	return h
}

// errorRowType builds the error row's Go type from its schema, as the Go SDK will on the
// workers: element (the input row, or bytes), msg, stack, code, destination.
func errorRowType(in input) (t reflect.Type, err error) {
	str := func(name string) *pipepb.Field {
		return &pipepb.Field{Name: name, Type: &pipepb.FieldType{TypeInfo: &pipepb.FieldType_AtomicType{AtomicType: pipepb.AtomicType_STRING}}}
	}
	element := &pipepb.Field{Name: "element", Type: &pipepb.FieldType{TypeInfo: &pipepb.FieldType_AtomicType{AtomicType: pipepb.AtomicType_BYTES}}}
	if in.Rows {
		element.Type = &pipepb.FieldType{TypeInfo: &pipepb.FieldType_RowType{RowType: &pipepb.RowType{Schema: in.Schema}}}
	}
	s := &pipepb.Schema{Fields: []*pipepb.Field{element, str("msg"), str("stack"), str("code"), str("destination")}}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, configErr("the error rows of this input cannot be built: %s", boundedtext.Sprint(r, 512))
		}
	}()
	if t, err = schema.ToType(s); err != nil {
		return nil, configErr("the error rows of this input cannot be built: %v", err)
	}
	return t, nil
}

// pipeline builds the Go graph: the placeholder in its own scope, then the write.
func (p *writePlan) pipeline() (_ *beam.Pipeline, err error) {
	bp, root := beam.NewPipelineWithRoot()
	ph := root.Scope(placeholderScope)
	col := beam.ParDo(ph, &placeholderFn{}, beam.Impulse(ph), beam.TypeDefinition{Var: beam.XType, T: p.in.elemType()})

	s := root.Scope(writeScope)
	if p.in.Windowed {
		// The sink's failures are emitted when a bundle ends, in the global window.
		col = beam.WindowInto(s, window.NewGlobalWindows(), col)
	}
	record := reflect.TypeFor[httpTask]()
	if p.cfg.AppEngine != nil {
		record = reflect.TypeFor[appEngineTask]()
	}
	fn := &toTaskFn{
		Rows: p.in.Rows, Body: p.body, TaskIDField: p.st.taskIDField, URLField: p.st.urlField, ScheduleTimeField: p.st.scheduleTimeField,
		AppEngine: p.cfg.AppEngine != nil, OnFailure: p.st.onFailure, Queue: p.cfg.Queue.Path(), RowType: beam.EncodedType{T: p.in.elemType()},
	}
	tasks, failed := beam.ParDo2(s.Scope("ToTasks"), fn, col, beam.TypeDefinition{Var: beam.YType, T: record})
	deadLetters, err := cloudtasksio.TryWrite(s, p.cfg, tasks)
	if err != nil {
		return nil, configErr("the sink refuses the configuration: %v", optionsError(err))
	}
	rows := &errorRowFn{Rows: p.in.Rows, RowType: beam.EncodedType{T: p.in.elemType()}, AppEngine: p.cfg.AppEngine != nil,
		ErrorType: beam.EncodedType{T: p.errorType}, Step: p.step}
	es := s.Scope(errorRowsScope)
	beam.ParDo(es, rows, beam.Flatten(es, deadLetters, failed), beam.TypeDefinition{Var: beam.ZType, T: p.errorType})
	return bp, nil
}

// expansion builds the Go graph and turns it into the answer to the request.
func (p *writePlan) expansion(req *requestParts, env *pipepb.Environment) (*jobpb.ExpansionResponse, error) {
	bp, err := p.pipeline()
	if err != nil {
		return nil, err
	}
	edges, _, err := bp.Build()
	if err != nil {
		return nil, fmt.Errorf("building the Go graph: %w", err)
	}
	pipe, err := graphx.Marshal(edges, &graphx.Options{Environment: env})
	if err != nil {
		return nil, fmt.Errorf("translating the Go graph: %w", err)
	}
	g, err := cutPlaceholder(pipe, p.in.ID)
	if err != nil {
		return nil, err
	}
	ns := req.namespace
	if ns == "" {
		// Beam's SDKs always send one; without it, each expansion gets a prefix of its own so
		// that two of them in one pipeline do not share ids.
		ns = fmt.Sprintf("beam-cloudtasks-xlang-%d-", unnamedExpansions.Add(1))
	}
	out := g.namespaced(ns, req.uniqueName, p.in)
	transform := out.Transforms[ns+g.write]
	transform.Spec = req.spec
	transform.Inputs = map[string]string{p.in.Tag: p.in.ID}
	transform.Outputs = map[string]string{p.st.errorOutput: ns + g.errorRows}
	delete(out.Transforms, ns+g.write)
	return &jobpb.ExpansionResponse{Components: out, Transform: transform, Requirements: pipe.GetRequirements()}, nil
}
