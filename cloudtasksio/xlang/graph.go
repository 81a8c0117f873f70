package xlang

import (
	"fmt"
	"strings"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/proto"
)

// graph is the Go pipeline proto of one expansion with the placeholder cut off: the write
// composite and everything under it, reading the caller's input PCollection.
type graph struct {
	c *pipepb.Components
	// write is the write composite's id, errorRows the id of the error rows' PCollection.
	write, errorRows string
}

// cutPlaceholder removes the placeholder's transforms and PCollections from the marshalled
// pipeline and points every use of the placeholder's output at the caller's PCollection input.
func cutPlaceholder(p *pipepb.Pipeline, input string) (*graph, error) {
	c := proto.Clone(p.GetComponents()).(*pipepb.Components)
	g := &graph{c: c}
	var placeholder string
	for _, id := range p.GetRootTransformIds() {
		switch c.Transforms[id].GetUniqueName() {
		case placeholderScope:
			placeholder = id
		case writeScope:
			g.write = id
		}
	}
	if placeholder == "" || g.write == "" {
		return nil, fmt.Errorf("the Go graph has no %s or %s scope", placeholderScope, writeScope)
	}

	// The placeholder's leaves are the Impulse and the ParDo whose output stands for the input.
	var cut []string
	var walk func(id string)
	walk = func(id string) {
		cut = append(cut, id)
		for _, sub := range c.Transforms[id].GetSubtransforms() {
			walk(sub)
		}
	}
	walk(placeholder)
	stand := ""
	for _, id := range cut {
		t := c.Transforms[id]
		if t.GetSpec().GetUrn() == "beam:transform:pardo:v1" {
			for _, out := range t.GetOutputs() {
				stand = out
			}
		}
		if len(t.GetSubtransforms()) == 0 {
			for _, out := range t.GetOutputs() {
				delete(c.Pcollections, out)
			}
		}
		delete(c.Transforms, id)
	}
	if stand == "" {
		return nil, fmt.Errorf("the Go graph's placeholder has no output")
	}
	for _, t := range c.Transforms {
		for tag, in := range t.Inputs {
			if in == stand {
				t.Inputs[tag] = input
			}
		}
	}

	for _, id := range c.Transforms[g.write].GetSubtransforms() {
		t := c.Transforms[id]
		if t.GetUniqueName() != writeScope+"/"+errorRowsScope {
			continue
		}
		for _, leaf := range t.GetSubtransforms() {
			if c.Transforms[leaf].GetSpec().GetUrn() == "beam:transform:pardo:v1" {
				for _, out := range c.Transforms[leaf].GetOutputs() {
					g.errorRows = out
				}
			}
		}
	}
	if g.errorRows == "" {
		return nil, fmt.Errorf("the Go graph has no error rows")
	}
	return g, nil
}

// namespaced returns the graph's components with every id prefixed with ns (the caller's
// input PCollection keeps its id), unique names moved under the caller's name for the
// transform, and every PCollection unbounded when the input is.
func (g *graph) namespaced(ns, uniqueName string, in input) *pipepb.Components {
	id := func(s string) string {
		if s == "" || s == in.ID {
			return s
		}
		return ns + s
	}
	ids := func(m map[string]string) map[string]string {
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = id(v)
		}
		return out
	}
	out := &pipepb.Components{
		Transforms: map[string]*pipepb.PTransform{}, Pcollections: map[string]*pipepb.PCollection{},
		WindowingStrategies: map[string]*pipepb.WindowingStrategy{}, Coders: map[string]*pipepb.Coder{},
		Environments: map[string]*pipepb.Environment{},
	}
	for k, t := range g.c.GetTransforms() {
		t = proto.Clone(t).(*pipepb.PTransform)
		rest, _ := strings.CutPrefix(t.GetUniqueName(), writeScope)
		t.UniqueName = uniqueName + rest
		t.Inputs, t.Outputs = ids(t.Inputs), ids(t.Outputs)
		for i, sub := range t.Subtransforms {
			t.Subtransforms[i] = id(sub)
		}
		t.EnvironmentId = id(t.EnvironmentId)
		out.Transforms[id(k)] = t
	}
	for k, pc := range g.c.GetPcollections() {
		pc = proto.Clone(pc).(*pipepb.PCollection)
		pc.CoderId, pc.WindowingStrategyId = id(pc.CoderId), id(pc.WindowingStrategyId)
		if in.Unbounded {
			pc.IsBounded = pipepb.IsBounded_UNBOUNDED
		}
		out.Pcollections[id(k)] = pc
	}
	for k, ws := range g.c.GetWindowingStrategies() {
		ws = proto.Clone(ws).(*pipepb.WindowingStrategy)
		ws.WindowCoderId, ws.EnvironmentId = id(ws.WindowCoderId), id(ws.EnvironmentId)
		out.WindowingStrategies[id(k)] = ws
	}
	for k, c := range g.c.GetCoders() {
		c = proto.Clone(c).(*pipepb.Coder)
		for i, sub := range c.ComponentCoderIds {
			c.ComponentCoderIds[i] = id(sub)
		}
		out.Coders[id(k)] = c
	}
	for k, env := range g.c.GetEnvironments() {
		out.Environments[id(k)] = proto.Clone(env).(*pipepb.Environment)
	}
	return out
}
