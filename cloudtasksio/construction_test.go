package cloudtasksio_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// tryWrite builds a pipeline over elems and returns TryWrite's error.
func tryWrite(cfg cloudtasksio.Config, elems ...any) error {
	p, s := beam.NewPipelineWithRoot()
	_ = p
	col := beam.Create(s, elems...)
	_, err := cloudtasksio.TryWrite(s, cfg, col)
	return err
}

var testQueue = cloudtasksio.Queue{Project: "p", Location: "l", Name: "q"}

func validHTTP() *cloudtasksio.HTTPTarget {
	return &cloudtasksio.HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}
}

// unregisteredQueue has the right signature but is never registered.
func unregisteredQueue(order) (cloudtasksio.Queue, error) { return testQueue, nil }

// unregisteredKey is a TaskIDFn that is never registered.
func unregisteredKey(order) (string, error) { return "k", nil }

// pastedHints holds the registration lines that the errors for unregisteredQueue and
// unregisteredKey suggest, pasted as they are: the compiler checks that they compile here, in
// the functions' own package. It is never called, so the functions stay unregistered.
func pastedHints() {
	register.Function1x2(unregisteredQueue)
	register.Function1x2(unregisteredKey)
}

// The error for an unregistered function names it and suggests the exact line to add, one that
// compiles when pasted (pastedHints holds it, and this test finds it there).
func TestUnregisteredFunctionErrorSuggestsALineThatCompiles(t *testing.T) {
	source, err := os.ReadFile("construction_test.go")
	require.NoError(t, err)
	for _, c := range []struct {
		cfg  cloudtasksio.Config
		hint string
	}{
		{cloudtasksio.Config{QueueFn: unregisteredQueue, HTTP: validHTTP()}, "register.Function1x2(unregisteredQueue)"},
		{cloudtasksio.Config{Queue: testQueue, TaskIDFn: unregisteredKey, HTTP: validHTTP()}, "register.Function1x2(unregisteredKey)"},
	} {
		err := tryWrite(c.cfg, order{ID: "1"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cloudtasksio_test."+strings.TrimSuffix(strings.TrimPrefix(c.hint, "register.Function1x2("), ")")+") is not registered")
		assert.Contains(t, err.Error(), "add "+c.hint+" to an init() function of its package")
		assert.Contains(t, string(source), "\n\t"+c.hint+"\n", "the hint is pasted in pastedHints, so it compiles")
	}
	_ = pastedHints
}

func TestConstructionErrors(t *testing.T) {
	o := order{ID: "1"}
	cases := []struct {
		name string
		cfg  cloudtasksio.Config
		elem any
		want string
	}{
		{"no destination", cloudtasksio.Config{HTTP: validHTTP()}, o, "no destination"},
		{"both destinations", cloudtasksio.Config{Queue: testQueue, QueueFn: queueByRegion, HTTP: validHTTP()}, o, "both set"},
		{"invalid queue", cloudtasksio.Config{Queue: cloudtasksio.Queue{Project: "p", Location: "l", Name: "bad/name"}, HTTP: validHTTP()}, o, "Queue.Name"},
		{"no target", cloudtasksio.Config{Queue: testQueue}, o, "exactly one of Config.HTTP"},
		{"two targets", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Serializer: serializeOrder}, o, "exactly one of Config.HTTP"},
		{"OIDC and OAuth", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/",
			OIDC: &cloudtasksio.OIDCToken{ServiceAccountEmail: "a@p.iam.gserviceaccount.com"}, OAuth: &cloudtasksio.OAuthToken{ServiceAccountEmail: "a@p.iam.gserviceaccount.com"}}}, o, "OIDC and HTTPTarget.OAuth"},
		{"blank OIDC account", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/",
			OIDC: &cloudtasksio.OIDCToken{ServiceAccountEmail: " "}}}, o, "OIDC.ServiceAccountEmail is blank"},
		{"bad method", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/", Method: "FETCH"}}, o, "HTTPTarget.Method"},
		{"relative URL", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "/orders"}}, o, "HTTPTarget.URL"},
		{"no URL and no url field", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{}}, o, "HTTPTarget.URL is empty"},
		{"dispatch deadline", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/", DispatchDeadline: time.Hour}}, o, "DispatchDeadline"},
		{"App Engine dispatch deadline", cloudtasksio.Config{Queue: testQueue, AppEngine: &cloudtasksio.AppEngineTarget{RelativeURI: "/t", DispatchDeadline: 25 * time.Hour}}, o, "AppEngineTarget.DispatchDeadline"},
		{"duplicate headers", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/",
			Headers: map[string]string{"X-A": "1", "x-a": "2"}}}, o, "same name ignoring case"},
		{"reserved App Engine header", cloudtasksio.Config{Queue: testQueue, AppEngine: &cloudtasksio.AppEngineTarget{RelativeURI: "/t",
			Headers: map[string]string{"X-AppEngine-QueueName": "q"}}}, o, "cannot be overridden"},
		{"bad relative URI", cloudtasksio.Config{Queue: testQueue, AppEngine: &cloudtasksio.AppEngineTarget{RelativeURI: "tasks"}}, o, "RelativeURI"},
		{"HTTP key on App Engine", cloudtasksio.Config{Queue: testQueue, AppEngine: &cloudtasksio.AppEngineTarget{RelativeURI: "/t"}}, routedOrder{}, "url"},
		{"App Engine key on HTTP", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP()}, appEngineOrder{}, "app-engine-service"},
		{"bad emulator endpoint", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), EmulatorEndpoint: "localhost"}, o, "Config.EmulatorEndpoint"},
		{"key file with emulator", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), EmulatorEndpoint: "localhost:8123",
			ServiceAccountKeyFile: "/secrets/key.json"}, o, "ServiceAccountKeyFile cannot be used with Config.EmulatorEndpoint"},
		{"pool with emulator", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), EmulatorEndpoint: "localhost:8123",
			Writer: cloudtasksio.WriterOptions{ChannelPoolSize: 4}}, o, "ChannelPoolSize cannot be used"},
		{"cap above the limit", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Writer: cloudtasksio.WriterOptions{MaxInFlightTasks: 200_000}}, o, "MaxInFlightTasks is 200000"},
		{"pool above the limit", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Writer: cloudtasksio.WriterOptions{ChannelPoolSize: 65}}, o, "ChannelPoolSize is 65"},
		{"tags with a serializer", cloudtasksio.Config{Queue: testQueue, Serializer: serializeKeyedOrder}, keyedOrder{}, "only the declarative targets"},
		{"negative cap", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Writer: cloudtasksio.WriterOptions{MaxInFlightTasks: -1}}, o, "MaxInFlightTasks"},
		{"backoffs inverted", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Writer: cloudtasksio.WriterOptions{
			RecoveryInitialBackoff: time.Minute, RecoveryMaxBackoff: time.Second}}, o, "RecoveryMaxBackoff"},
		{"unknown policy", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), OnFailure: 7}, o, "Config.OnFailure"},
		{"staged without exactly-once", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Staged: &cloudtasksio.StagedOptions{}}, o, "Config.Staged"},
		{"exactly-once with QueueFn", cloudtasksio.Config{QueueFn: queueByRegion, HTTP: validHTTP(), Delivery: cloudtasksio.ExactlyOnce}, o, "fixed Config.Queue"},
		{"exactly-once with dead letters", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Delivery: cloudtasksio.ExactlyOnce,
			OnFailure: cloudtasksio.DeadLetter}, o, "FailBundle"},
		{"unregistered QueueFn", cloudtasksio.Config{QueueFn: unregisteredQueue, HTTP: validHTTP()}, o, "not registered"},
		{"closure QueueFn", cloudtasksio.Config{QueueFn: func(order) (cloudtasksio.Queue, error) { return testQueue, nil }, HTTP: validHTTP()}, o, "closure"},
		{"mis-typed QueueFn", cloudtasksio.Config{QueueFn: queueByRegion, HTTP: validHTTP()}, appEngineOrder{}, "QueueFn has type"},
		{"mis-typed Serializer", cloudtasksio.Config{Queue: testQueue, Serializer: keyOfOrder}, o, "Serializer has type"},
		{"QueueFn not a function", cloudtasksio.Config{QueueFn: "q", HTTP: validHTTP()}, o, "must be a function"},
		{"TaskIDFn and task-id field", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), TaskIDFn: keyOfKeyedOrder}, keyedOrder{}, "both name tasks"},
		{"form with conflicting Content-Type", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/",
			Body: formats.FormURLEncoded(), Headers: map[string]string{"Content-Type": "application/json"}}}, formOrder{}, "Content-Type"},
		{"format cannot encode the type", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/",
			Body: formats.FormURLEncoded()}}, o, "Amount"},
		{"unknown format", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/",
			Body: formats.Format{Name: "yaml"}}}, o, "yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tryWrite(c.cfg, c.elem)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Panics(t, func() {
				_, s := beam.NewPipelineWithRoot()
				cloudtasksio.Write(s, c.cfg, beam.Create(s, c.elem))
			})
		})
	}
}

func TestValidConfigsConstruct(t *testing.T) {
	cases := []struct {
		name string
		cfg  cloudtasksio.Config
		elem any
	}{
		{"fixed HTTP", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP()}, order{}},
		{"url field", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{Method: "put", Body: formats.JSON()}}, routedOrder{}},
		{"App Engine", cloudtasksio.Config{Queue: testQueue, AppEngine: &cloudtasksio.AppEngineTarget{RelativeURI: "/t",
			Routing: &cloudtasksio.AppEngineRouting{Service: "worker"}, Body: formats.JSON()}}, appEngineOrder{}},
		{"serializer", cloudtasksio.Config{QueueFn: queueByRegion, Serializer: serializeOrder, TaskIDFn: keyOfOrder}, order{}},
		{"emulator", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), EmulatorEndpoint: "127.0.0.1:8123"}, order{}},
		{"key file and pool", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), ServiceAccountKeyFile: "/secrets/key.json",
			Writer: cloudtasksio.WriterOptions{ChannelPoolSize: 8}}, order{}},
		{"form with equal Content-Type", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/",
			Body: formats.FormURLEncoded(), Headers: map[string]string{"content-type": "application/x-www-form-urlencoded"}}}, formOrder{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, tryWrite(c.cfg, c.elem))
		})
	}
}

func TestFailedTaskRecoversTheTask(t *testing.T) {
	_, err := cloudtasksio.FailedTask(deadLetterOf(nil))
	assert.ErrorContains(t, err, "carries no task")
	task := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "https://e.com/"}}}
	got, err := cloudtasksio.FailedTask(deadLetterOf(task))
	require.NoError(t, err)
	assert.Equal(t, "https://e.com/", got.GetHttpRequest().GetUrl())
	fe := deadLetterOf(task)
	fe.Connector = "pubsub"
	_, err = cloudtasksio.FailedTask(fe)
	assert.ErrorContains(t, err, "pubsub")
	fe = deadLetterOf(task)
	fe.Payload = []byte{0xff, 0xff}
	_, err = cloudtasksio.FailedTask(fe)
	assert.ErrorContains(t, err, "not a Cloud Tasks task")
}

// A PCollection of strings is a declarative target's element type too: json, raw and avro take
// it, csv and form-urlencoded refuse it at construction, and any other non-struct type is
// refused, each error naming the type.
func TestPlainElementTypesPerFormat(t *testing.T) {
	httpWith := func(body formats.Format) cloudtasksio.Config {
		return cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/in", Body: body}}
	}
	assert.NoError(t, tryWrite(httpWith(formats.JSON()), `{"id":"1"}`))
	assert.NoError(t, tryWrite(httpWith(formats.Raw()), "anything"))
	assert.NoError(t, tryWrite(httpWith(formats.JSON()), []byte(`{"id":"1"}`)))
	assert.ErrorContains(t, tryWrite(httpWith(formats.CSV()), "a,b"), "element type string has no fields to write as a record")
	assert.ErrorContains(t, tryWrite(httpWith(formats.FormURLEncoded()), "a=b"), "element type string has no field names")
	assert.ErrorContains(t, tryWrite(httpWith(formats.JSON()), 42), "element type int: want a struct, a pointer to a struct, a string or a []byte")
}

// The avro encoder lives in package formats/avro, which this test binary does not import: a
// pipeline using the avro format fails at construction, naming the field and the import to add,
// whether the format comes from formats.Avro or from the format option key.
func TestAvroWithoutItsPackageIsAConstructionErrorNamingTheImport(t *testing.T) {
	const importLine = `add the import _ "github.com/beam-cloudtasks/beam-cloudtasks/formats/avro"`
	err := tryWrite(cloudtasksio.Config{Queue: testQueue,
		HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/in", Body: formats.Avro(`{"type":"record","name":"O","fields":[{"name":"id","type":"string"}]}`)}},
		order{ID: "1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTPTarget.Body")
	assert.Contains(t, err.Error(), importLine)

	_, err = cloudtasksio.ConfigFromOptions(map[string]string{"project": "p", "location": "l", "queue": "q",
		"http.url": "https://example.com/in", "format": "avro", "avro.schema": `"string"`})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `option "format"`)
	assert.Contains(t, err.Error(), importLine)
}
