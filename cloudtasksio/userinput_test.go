package cloudtasksio

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// What one element's user data or user function can do to its bundle: under DeadLetter and
// LogAndDrop, nothing. A Go string may hold bytes Cloud Tasks cannot take (invalid UTF-8), and
// a user function may panic or return a typed nil error; each is the element's failure.

type headerOrder struct {
	ID      string            `json:"id"`
	Headers map[string]string `cloudtasks:"headers"`
}

// bundleWriteFnFor is a set-up writeFn for elements like elem, writing to srv's bundle queue
// with cfg's target and policy.
func bundleWriteFnFor(t *testing.T, srv *cloudtaskstest.Server, cfg Config, elem any) *writeFn {
	t.Helper()
	q, err := ParseQueue(bundleQueue)
	require.NoError(t, err)
	cfg.Queue, cfg.EmulatorEndpoint = q, srv.Addr
	spec, err := compile(cfg, typeOf(elem))
	require.NoError(t, err)
	f := &writeFn{Spec: spec}
	require.NoError(t, f.Setup())
	return f
}

// jsonTarget is the HTTP target of these tests: a fixed URL, a JSON body.
func jsonTarget() *HTTPTarget {
	return &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}
}

// runBundle writes elems in one bundle of f and returns the dead letters and the bundle's error.
func runBundle(t *testing.T, f *writeFn, elems ...any) ([]deadletter.FailedElement, error) {
	t.Helper()
	ctx, _ := metricsContext()
	var dls []deadletter.FailedElement
	emit := func(_ beam.EventTime, fe deadletter.FailedElement) { dls = append(dls, fe) }
	require.NoError(t, f.StartBundle(ctx, emit))
	for _, e := range elems {
		if err := f.ProcessElement(ctx, 0, e, emit); err != nil {
			return dls, err
		}
	}
	return dls, f.FinishBundle(ctx, emit)
}

func TestAnElementWithInvalidUTF8InItsURLIsDeadLetteredNotSent(t *testing.T) {
	srv := newBundleServer(t)
	f := newBundleWriteFn(t, srv, DeadLetter, 10, WriterOptions{})
	dls, err := runBundle(t, f, urlOrder{ID: "good"}, urlOrder{ID: "bad", URL: "https://example.com/o/\xff"},
		urlOrder{ID: "worse", URL: "ftp://example.com/o/\xfe"})
	require.NoError(t, err, "one element's bytes must not fail the bundle under DeadLetter")
	assert.Len(t, srv.Tasks(bundleQueue), 1, "only the good element is created")
	assert.Equal(t, 1, srv.Stats().CreateTaskCalls, "the bad ones are never sent")
	require.Len(t, dls, 2)
	for _, dl := range dls {
		assert.Equal(t, CodeInvalidArgument, dl.Code)
		assert.Contains(t, dl.Error, "http_request.url is not valid UTF-8")
		assert.NotContains(t, dl.Error, "example.com", "the URL is not repeated")
		assert.Contains(t, dl.Error, "replaced by U+FFFD", "the payload had to be changed to be encoded")
		var task cloudtaskspb.Task
		require.NoError(t, proto.Unmarshal(dl.Payload, &task), "the dead letter carries the task")
		assert.True(t, strings.HasSuffix(task.GetHttpRequest().GetUrl(), "/o/\uFFFD"), "got %q", task.GetHttpRequest().GetUrl())
	}
}

func TestAnElementWithAnInvalidUTF8HeaderIsDroppedUnderLogAndDrop(t *testing.T) {
	srv := newBundleServer(t)
	f := bundleWriteFnFor(t, srv, Config{HTTP: jsonTarget(), OnFailure: LogAndDrop}, headerOrder{})
	ctx, counters := metricsContext()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	require.NoError(t, f.ProcessElement(ctx, 0, headerOrder{ID: "good"}, discardDeadLetters))
	require.NoError(t, f.ProcessElement(ctx, 0, headerOrder{ID: "bad", Headers: map[string]string{"X-Sig": "secret\xc3\x28"}}, discardDeadLetters))
	require.NoError(t, f.ProcessElement(ctx, 0, headerOrder{ID: "bad-name", Headers: map[string]string{"X-\xff": "v"}}, discardDeadLetters))
	require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))
	assert.Len(t, srv.Tasks(bundleQueue), 1)
	assert.Equal(t, 1, srv.Stats().CreateTaskCalls)
	assert.Equal(t, int64(2), counters()[MetricRecordsSendErrors], "each drop is counted")
}

func TestInvalidUTF8IsFoundInEveryStringFieldAndNamedWithoutItsText(t *testing.T) {
	task := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url:     "https://example.com/",
		Headers: map[string]string{"Authorization": "Bearer s3cr3t\xff"},
		AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: "sa@p.iam.gserviceaccount.com", Audience: "aud\xfe"}},
	}}}
	assert.Equal(t, "http_request.a value of headers", invalidUTF8Field(task.ProtoReflect()))
	err := validateTask(task, time.Now())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3t", "a header value is never repeated")

	task.GetHttpRequest().Headers = map[string]string{"Authorization": "Bearer ok"}
	assert.Equal(t, "http_request.oidc_token.audience", invalidUTF8Field(task.ProtoReflect()))

	replaceInvalidUTF8(task.ProtoReflect())
	assert.Empty(t, invalidUTF8Field(task.ProtoReflect()))
	assert.Equal(t, "aud\uFFFD", task.GetHttpRequest().GetOidcToken().GetAudience())
	_, err = proto.Marshal(task)
	require.NoError(t, err)

	ae := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{
		RelativeUri: "/o", Headers: map[string]string{"K\xff": "v"}}}}
	assert.Equal(t, "app_engine_http_request.a key of headers", invalidUTF8Field(ae.ProtoReflect()))
	ae.GetAppEngineHttpRequest().RelativeUri = "/o\xff"
	replaceInvalidUTF8(ae.ProtoReflect())
	assert.Empty(t, invalidUTF8Field(ae.ProtoReflect()))
	assert.Equal(t, "v", ae.GetAppEngineHttpRequest().GetHeaders()["K\uFFFD"])
}

// plainOrder has no cloudtasks tags: a Serializer builds its task.
type plainOrder struct{ ID string }

type typedNilErr struct{ msg string }

func (e *typedNilErr) Error() string { return e.msg } // panics on a nil receiver

func panicOnBad(o plainOrder) (*cloudtaskspb.Task, error) {
	if o.ID == "bad" {
		var parts []string
		_ = parts[3] // a bug that shows only for some elements
	}
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "https://example.com/orders/" + o.ID}}}, nil
}

func typedNilOnBad(o plainOrder) (*cloudtaskspb.Task, error) {
	if o.ID == "bad" {
		var err *typedNilErr
		return nil, err
	}
	return panicOnBad(o)
}

func queueFnLongError(o urlOrder) (Queue, error) {
	return Queue{}, errors.New("no queue for " + o.ID)
}

func init() {
	register.Function1x2(panicOnBad)
	register.Function1x2(typedNilOnBad)
	register.Function1x2(queueFnLongError)
}

func TestASerializerThatPanicsOrReturnsATypedNilErrorFailsOnlyItsElement(t *testing.T) {
	for name, fn := range map[string]any{"panic": panicOnBad, "typed nil error": typedNilOnBad} {
		t.Run(name, func(t *testing.T) {
			srv := newBundleServer(t)
			f := bundleWriteFnFor(t, srv, Config{Serializer: fn, OnFailure: DeadLetter}, plainOrder{})
			dls, err := runBundle(t, f, plainOrder{ID: "1"}, plainOrder{ID: "bad"}, plainOrder{ID: "2"})
			require.NoError(t, err)
			assert.Len(t, srv.Tasks(bundleQueue), 2)
			require.Len(t, dls, 1)
			assert.Equal(t, CodeSerialization, dls[0].Code)
			assert.Contains(t, dls[0].Error, "the Serializer failed")
		})
	}
}

func TestCall1x2TurnsAPanicAndATypedNilErrorIntoErrors(t *testing.T) {
	_, err := call1x2(reflectx.ToFunc1x2(reflectx.MakeFunc(panicOnBad)), plainOrder{ID: "bad"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panicked: runtime error: index out of range")
	_, err = call1x2(reflectx.ToFunc1x2(reflectx.MakeFunc(typedNilOnBad)), plainOrder{ID: "bad"})
	require.Error(t, err)
	assert.Equal(t, "returned a nil *cloudtasksio.typedNilErr as its error", err.Error())
	out, err := call1x2(reflectx.ToFunc1x2(reflectx.MakeFunc(panicOnBad)), plainOrder{ID: "ok"})
	require.NoError(t, err)
	assert.NotNil(t, out)
}

func TestAQueueFnErrorThatFailsTheBundleIsBounded(t *testing.T) {
	srv := newBundleServer(t)
	f := newBundleWriteFn(t, srv, DeadLetter, 10, WriterOptions{})
	f.queueFn = reflectx.ToFunc1x2(reflectx.MakeFunc(queueFnLongError))
	ctx := context.Background()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	err := f.ProcessElement(ctx, 0, urlOrder{ID: strings.Repeat("p", 1<<20)}, discardDeadLetters)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 2*maxErrorText)
	assert.Contains(t, err.Error(), "Config.QueueFn failed: no queue for ppp")
}

// fragile marshals itself, and panics for the value "boom".
type fragile string

func (f fragile) MarshalJSON() ([]byte, error) {
	if f == "boom" {
		panic("fragile: cannot marshal boom") // a bug that shows only for some values
	}
	return []byte(`"` + string(f) + `"`), nil
}

type fragileOrder struct {
	ID   string  `json:"id"`
	Note fragile `json:"note"`
}

func TestABodyFieldWhoseMarshalerPanicsFailsOnlyItsElement(t *testing.T) {
	srv := newBundleServer(t)
	f := bundleWriteFnFor(t, srv, Config{HTTP: jsonTarget(), OnFailure: DeadLetter}, fragileOrder{})
	dls, err := runBundle(t, f, fragileOrder{ID: "1", Note: "fine"}, fragileOrder{ID: "2", Note: "boom"}, fragileOrder{ID: "3"})
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(bundleQueue), 2)
	require.Len(t, dls, 1)
	assert.Equal(t, CodeSerialization, dls[0].Code)
	assert.Contains(t, dls[0].Error, "building the task panicked: fragile: cannot marshal boom")
	assert.NotEmpty(t, dls[0].Element, "the element travels with its dead letter")
	assert.NotContains(t, dls[0].Error, "goroutine", "the stack is for the log, not the dead letter")

	// The failure keeps where it panicked, for the one log line of the bundle.
	b, err := f.builders.forElement(fragileOrder{})
	require.NoError(t, err)
	_, _, err = b.build(fragileOrder{ID: "4", Note: "boom"})
	var ef *elementFailure
	require.ErrorAs(t, err, &ef)
	assert.Contains(t, ef.stack, "fragile.MarshalJSON")
	assert.LessOrEqual(t, len(ef.stack), maxPanicStack)
}

// BenchmarkTaskUTF8Check is what the UTF-8 check costs a typical HTTP task: a URL, three
// headers, an OIDC token and a 1 KiB body (bytes, not checked).
func BenchmarkTaskUTF8Check(b *testing.B) {
	task := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url:     "https://orders.example.com/v1/orders/callback?region=eu-west",
		Headers: map[string]string{"Content-Type": "application/json", "X-Trace": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "X-Tenant": "acme"},
		Body:    make([]byte, 1024),
		AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: "tasks@project.iam.gserviceaccount.com", Audience: "https://orders.example.com"}},
	}}}
	b.Run("read directly", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if invalidTaskText(task) != "" {
				b.Fatal("valid task reported invalid")
			}
		}
	})
	b.Run("walked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if invalidUTF8Field(task.ProtoReflect()) != "" {
				b.Fatal("valid task reported invalid")
			}
		}
	})
}

// Every string field a task can hold is checked by invalidTaskText, whether it reads the field
// directly or walks the task: for each string field of the Task message and the messages in it
// (found from the descriptors, so a field a new version of the API adds is checked too), a
// task with invalid UTF-8 there alone is caught.
func TestTheDirectUTF8CheckCoversEveryStringFieldOfATask(t *testing.T) {
	var paths [][]protoreflect.FieldDescriptor
	var walk func(md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor, depth int)
	walk = func(md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor, depth int) {
		if depth > 4 {
			return
		}
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			path := append(slices.Clone(prefix), fd)
			switch {
			case fd.IsMap():
				if fd.MapKey().Kind() == protoreflect.StringKind || fd.MapValue().Kind() == protoreflect.StringKind {
					paths = append(paths, path)
				}
			case fd.Kind() == protoreflect.StringKind && !fd.IsList():
				paths = append(paths, path)
			case fd.Kind() == protoreflect.MessageKind && !fd.IsList():
				walk(fd.Message(), path, depth+1)
			}
		}
	}
	walk((&cloudtaskspb.Task{}).ProtoReflect().Descriptor(), nil, 0)
	require.NotEmpty(t, paths)
	names := map[string]bool{}
	for _, path := range paths {
		task := &cloudtaskspb.Task{}
		m := task.ProtoReflect()
		for _, fd := range path[:len(path)-1] {
			m = m.Mutable(fd).Message()
		}
		last := path[len(path)-1]
		if last.IsMap() {
			key, value := "k", "v"
			if last.MapKey().Kind() == protoreflect.StringKind {
				key = "k\xff"
			} else {
				value = "v\xff"
			}
			m.Mutable(last).Map().Set(protoreflect.ValueOfString(key).MapKey(), protoreflect.ValueOfString(value))
		} else {
			m.Set(last, protoreflect.ValueOfString("x\xff"))
		}
		var name []string
		for _, fd := range path {
			name = append(name, string(fd.Name()))
		}
		names[strings.Join(name, ".")] = true
		assert.NotEmpty(t, invalidTaskText(task), "%s", strings.Join(name, "."))
		_, err := proto.Marshal(task)
		assert.Error(t, err, "%s: the client could not encode it either", strings.Join(name, "."))
	}
	assert.True(t, names["http_request.url"] && names["app_engine_http_request.relative_uri"] && names["http_request.headers"], "the walk reached the request fields: %v", names)
}
