package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/kafka-to-cloudtasks/kafkatemplate"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// The hostile-input table: values a mistaken or malicious user could give at every way into
// the project (option keys and values, struct tags, elements, the standalone emulator's flags
// and environment variables, the template's flags). Each must end in a clear error that names
// the key, flag or field it came from, within a time limit, without a panic, and without
// repeating a huge value or a secret.

// hostileMaxError bounds every error (or, for the emulator, its error line).
const hostileMaxError = 2048

// hostileSecret stands for a password or token a user put where it does not belong; no error
// may repeat it.
const hostileSecret = "s3cr3t-t0ken"

// mib is a 1 MiB value of one repeated byte; an error that repeats it shows a long run of it.
func mib(c byte) string { return strings.Repeat(string(c), 1<<20) }

// echoed reports whether text holds a run of 300 or more of the same byte: a huge input
// repeated instead of cut.
var echoed = regexp.MustCompile(`(Z{300}|W{300}|M{300})`)

// hostileCase is one row: what to give, where, and what the error must name.
type hostileCase struct {
	kind string // "option", "tag", "element", "emulator" or "template"
	name string
	// run returns the error text the user sees; an empty text means the value was accepted.
	run  func(t *testing.T) string
	want []string // every one must appear in the error
}

func TestHostileInputsGetClearBoundedErrors(t *testing.T) {
	elementCases, runElements := hostileElementCases()
	var cases []hostileCase
	cases = append(cases, hostileOptionCases()...)
	cases = append(cases, hostileTagCases()...)
	cases = append(cases, elementCases...)
	cases = append(cases, hostileEmulatorCases()...)
	cases = append(cases, hostileTemplateCases()...)
	require.GreaterOrEqual(t, len(cases), 80, "the table covers at least 80 hostile inputs")
	kinds := map[string]int{}
	for _, c := range cases {
		kinds[c.kind]++
	}
	t.Logf("%d hostile inputs: %v", len(cases), kinds)
	// The slow parts run once, before the per-case time limit: building the emulator, and the
	// one pipeline that writes every hostile element.
	buildEmulator(t)
	runElements(t)

	for _, c := range cases {
		t.Run(c.kind+"/"+c.name, func(t *testing.T) {
			type result struct {
				text     string
				panicked any
			}
			done := make(chan result, 1)
			go func() {
				defer func() {
					if p := recover(); p != nil {
						done <- result{panicked: p}
					}
				}()
				done <- result{text: c.run(t)}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("no answer within 60s: the input hangs")
			}
			require.Nil(t, r.panicked, "panicked")
			require.NotEmpty(t, r.text, "accepted; want an error")
			for _, w := range c.want {
				assert.Contains(t, r.text, w, "the error names where the value came from")
			}
			assert.Less(t, len(r.text), hostileMaxError, "the error is bounded: %.300q", r.text)
			assert.NotContains(t, r.text, hostileSecret, "the error repeats a secret")
			assert.False(t, echoed.MatchString(r.text), "the error repeats a huge input: %.300q", r.text)
		})
	}
}

// errText is err's text, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// --- option keys and values (ConfigFromOptions) ---

func hostileOptionCases() []hostileCase {
	base := func(extra map[string]string) map[string]string {
		opts := map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/"}
		for k, v := range extra {
			if v == "\x00delete" {
				delete(opts, k)
				continue
			}
			opts[k] = v
		}
		return opts
	}
	row := func(name, want string, extra map[string]string) hostileCase {
		return hostileCase{kind: "option", name: name, want: []string{want}, run: func(*testing.T) string {
			_, err := cloudtasksio.ConfigFromOptions(base(extra))
			return errText(err)
		}}
	}
	return []hostileCase{
		row("project missing", `"project"`, map[string]string{"project": "\x00delete"}),
		row("project 1 MiB", `"project"`, map[string]string{"project": mib('Z')}),
		row("project with a slash", `"project"`, map[string]string{"project": "p/x"}),
		row("project with NUL", `"project"`, map[string]string{"project": "p\x00x"}),
		row("location 64 bytes", `"location"`, map[string]string{"location": strings.Repeat("l", 64)}),
		row("location 1 MiB", `"location"`, map[string]string{"location": mib('Z')}),
		row("queue 101 bytes", `"queue"`, map[string]string{"queue": strings.Repeat("q", 101)}),
		row("queue 1 MiB with a newline", `"queue"`, map[string]string{"queue": mib('Z') + "\n"}),
		row("unknown key 1 MiB", "unknown option key", map[string]string{mib('Z'): "v"}),
		row("unknown key with NUL", "unknown option key", map[string]string{"sink.\x00": "v"}),
		row("http.url 1 MiB", `"http.url"`, map[string]string{"http.url": "https://example.com/" + mib('Z')}),
		row("http.url ftp", `"http.url"`, map[string]string{"http.url": "ftp://example.com/"}),
		row("http.url with a control byte", `"http.url"`, map[string]string{"http.url": "https://example.com/\x7f"}),
		row("http.method 1 MiB", `"http.method"`, map[string]string{"http.method": mib('Z')}),
		row("header name 1 MiB", `"http.headers.`, map[string]string{"http.headers." + mib('Z'): "v"}),
		row("header value with CRLF", `"http.headers.X-Id"`, map[string]string{"http.headers.X-Id": "a\r\nInjected: yes"}),
		row("header name with a space", `"http.headers.Bad Name"`, map[string]string{"http.headers.Bad Name": "v"}),
		row("OIDC e-mail 1 MiB", `"http.oidc.service-account-email"`, map[string]string{"http.oidc.service-account-email": mib('Z') + "@p.iam.gserviceaccount.com"}),
		row("OIDC e-mail with NUL", `"http.oidc.service-account-email"`, map[string]string{"http.oidc.service-account-email": "a\x00@p.iam.gserviceaccount.com"}),
		row("OAuth e-mail without @", `"http.oauth.service-account-email"`, map[string]string{"http.oauth.service-account-email": "nobody"}),
		row("target.type 1 MiB", `"target.type"`, map[string]string{"target.type": mib('Z')}),
		row("format 1 MiB", `"format"`, map[string]string{"format": mib('Z')}),
		row("csv delimiter of two characters", `"csv.field-delimiter"`, map[string]string{"format": "csv", "csv.field-delimiter": "ab"}),
		row("key file with NUL", `"service-account-key-file"`, map[string]string{"service-account-key-file": "/secrets/key\x00.json"}),
		row("key file 1 MiB", `"service-account-key-file"`, map[string]string{"service-account-key-file": "/" + mib('Z')}),
		row("emulator with a scheme", "drop the scheme", map[string]string{"emulator-endpoint": "http://127.0.0.1:8123"}),
		row("emulator with a token", `"emulator-endpoint"`, map[string]string{"emulator-endpoint": "user:" + hostileSecret + "@127.0.0.1:8123"}),
		row("emulator host 1 MiB", `"emulator-endpoint"`, map[string]string{"emulator-endpoint": mib('Z') + ":8123"}),
		row("emulator unbracketed IPv6", `"emulator-endpoint"`, map[string]string{"emulator-endpoint": "::1:8123"}),
		row("client.endpoint with a token", `"client.endpoint"`, map[string]string{"client.endpoint": "u:" + hostileSecret + "@cloudtasks.googleapis.com:443"}),
		row("impersonation e-mail 1 MiB", `"client.impersonate-service-account"`, map[string]string{"client.impersonate-service-account": mib('Z') + "@p.iam.gserviceaccount.com"}),
		row("quota project 1 MiB", `"client.quota-project"`, map[string]string{"client.quota-project": mib('Z')}),
		row("universe domain with a scheme", `"client.universe-domain"`, map[string]string{"client.universe-domain": "https://googleapis.com"}),
		row("delivery guarantee 1 MiB", `"sink.delivery-guarantee"`, map[string]string{"sink.delivery-guarantee": mib('Z')}),
		row("max tasks of 1 MiB digits", `"sink.in-flight.max-tasks"`, map[string]string{"sink.in-flight.max-tasks": strings.Repeat("9", 1<<20)}),
		row("max tasks negative", `"sink.in-flight.max-tasks"`, map[string]string{"sink.in-flight.max-tasks": "-1"}),
		row("backoff 1 MiB", `"sink.recovery.initial-backoff"`, map[string]string{"sink.recovery.initial-backoff": mib('Z')}),
		row("backoff of 10^30 hours", `"sink.recovery.max-backoff"`, map[string]string{"sink.recovery.max-backoff": "1" + strings.Repeat("0", 30) + "h"}),
		row("max attempts zero", `"sink.recovery.max-attempts"`, map[string]string{"sink.recovery.max-attempts": "0"}),
		row("staged key without exactly-once", `"sink.staged.name-retention"`, map[string]string{"sink.staged.name-retention": "1h"}),
		row("preflight 1 MiB", `"sink.queue-preflight"`, map[string]string{"sink.queue-preflight": mib('Z')}),
		row("per-destination metrics not a boolean", `"sink.metrics.per-destination"`, map[string]string{"sink.metrics.per-destination": "yes please"}),
	}
}

// --- struct tags (TryWrite's element type) ---

type (
	tagUnknownKey struct {
		ID  string `json:"id"`
		Bad string `cloudtasks:"nope"`
	}
	tagLongKey struct {
		ID  string `json:"id"`
		Bad string `cloudtasks:"WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW"`
	}
	tagURLNotString struct {
		ID  string `json:"id"`
		URL int    `cloudtasks:"url"`
	}
	tagHeadersNotMap struct {
		ID      string `json:"id"`
		Headers string `cloudtasks:"headers"`
	}
	tagOtherFamily struct {
		ID  string `json:"id"`
		URI string `cloudtasks:"relative-uri"`
	}
	tagTwice struct {
		ID string `json:"id"`
		A  string `cloudtasks:"task-id"`
		B  string `cloudtasks:"task-id"`
	}
	tagScheduleNotTime struct {
		ID   string `json:"id"`
		When string `cloudtasks:"schedule-time"`
	}
	tagUnexported struct {
		ID string `json:"id"`
		//lint:ignore U1000 the unexported field is there to be refused
		url string `cloudtasks:"url"`
	}
	tagDeadlineNotDuration struct {
		ID       string `json:"id"`
		Deadline string `cloudtasks:"dispatch-deadline"`
	}
	tagServiceNotPointer struct {
		ID      string `json:"id"`
		Service string `cloudtasks:"app-engine-service"`
	}
	tagKeyWithSpace struct {
		ID  string `json:"id"`
		URL string `cloudtasks:" url"`
	}
	tagTaskIDNotString struct {
		ID  string `json:"id"`
		Key int    `cloudtasks:"task-id"`
	}
	tagFormNotString struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	tagRawTwoBodies struct {
		A string `json:"a"`
		B string `json:"b"`
	}
	tagMethodNotString struct {
		ID     string `json:"id"`
		Method int    `cloudtasks:"http-method"`
	}
	tagNoURL struct {
		ID string `json:"id"`
	}
)

func hostileTagCases() []hostileCase {
	http := func(body formats.Format) cloudtasksio.Config {
		return cloudtasksio.Config{Queue: cloudtasksio.Queue{Project: "p", Location: "l", Name: "q"},
			HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/", Body: body}}
	}
	row := func(name string, cfg cloudtasksio.Config, elem any, want ...string) hostileCase {
		return hostileCase{kind: "tag", name: name, want: want, run: func(*testing.T) string {
			_, s := beam.NewPipelineWithRoot()
			_, err := cloudtasksio.TryWrite(s, cfg, beam.Create(s, elem))
			return errText(err)
		}}
	}
	noURL := http(formats.JSON())
	noURL.HTTP.URL = ""
	return []hostileCase{
		row("unknown key", http(formats.JSON()), tagUnknownKey{}, "Bad", `"nope"`),
		row("a 250-byte key", http(formats.JSON()), tagLongKey{}, "Bad"),
		row("url not a string", http(formats.JSON()), tagURLNotString{}, "URL"),
		row("headers not a map", http(formats.JSON()), tagHeadersNotMap{}, "Headers"),
		row("key of the other family", http(formats.JSON()), tagOtherFamily{}, "URI", "relative-uri"),
		row("one key twice", http(formats.JSON()), tagTwice{}, "task-id"),
		row("schedule-time not a time", http(formats.JSON()), tagScheduleNotTime{}, "When"),
		row("unexported metadata field", http(formats.JSON()), tagUnexported{}, "url"),
		row("dispatch-deadline not a duration", http(formats.JSON()), tagDeadlineNotDuration{}, "Deadline"),
		row("app-engine-service not a pointer", http(formats.JSON()), tagServiceNotPointer{}, "Service"),
		row("key with a space", http(formats.JSON()), tagKeyWithSpace{}, "URL"),
		row("task-id not a string", http(formats.JSON()), tagTaskIDNotString{}, "Key"),
		row("form field not a string", http(formats.FormURLEncoded()), tagFormNotString{}, "Amount"),
		row("raw with two body fields", http(formats.Raw()), tagRawTwoBodies{}, "raw"),
		row("http-method not a string", http(formats.JSON()), tagMethodNotString{}, "Method"),
		row("no URL anywhere", noURL, tagNoURL{}, "HTTPTarget.URL", "cloudtasks:\"url\""),
	}
}

// --- elements (per-element failures under DeadLetter) ---

// hostileElem carries every metadata field an element can get wrong. Case names its queue, so
// that each dead letter says which row it belongs to.
type hostileElem struct {
	Case     string            `json:"case"`
	URL      string            `cloudtasks:"url"`
	Method   string            `cloudtasks:"http-method"`
	Headers  map[string]string `cloudtasks:"headers"`
	Schedule time.Time         `cloudtasks:"schedule-time"`
	Deadline time.Duration     `cloudtasks:"dispatch-deadline"`
	Body     string            `json:"body"`
}

func init() {
	beam.RegisterType(reflect.TypeOf((*hostileElem)(nil)).Elem())
	register.Function1x2(hostileQueue)
	register.Function1x1(hostileRecord)
}

// hostileQueue sends each element to the queue of its case.
func hostileQueue(e hostileElem) (cloudtasksio.Queue, error) {
	return cloudtasksio.Queue{Project: "p", Location: "l", Name: "hostile-" + e.Case}, nil
}

// hostileDeadLetters holds the dead letters of the element run by destination queue. Prism
// runs the pipeline's DoFns in this process, so the test reads what the DoFn stored.
var hostileDeadLetters sync.Map

func hostileRecord(fe deadletter.FailedElement) int {
	hostileDeadLetters.Store(fe.Destination, fe)
	return 0
}

func hostileElementCases() ([]hostileCase, func(*testing.T)) {
	elems := map[string]hostileElem{
		"url-1mib":          {URL: "https://example.com/" + mib('Z')},
		"url-ftp":           {URL: "ftp://example.com/x"},
		"url-nul":           {URL: "https://example.com/\x00"},
		"url-no-host":       {URL: "https:///path"},
		"method-fetch":      {Method: "FETCH"},
		"method-1mib":       {Method: mib('Z')},
		"header-name-1mib":  {Headers: map[string]string{mib('Z'): "v"}},
		"header-crlf":       {Headers: map[string]string{"X-Id": "a\r\nInjected: yes"}},
		"header-dup":        {Headers: map[string]string{"X-Id": "a", "x-id": "b"}},
		"schedule-40-days":  {Schedule: time.Now().Add(40 * 24 * time.Hour)},
		"deadline-1h":       {Deadline: time.Hour},
		"deadline-1s":       {Deadline: time.Second},
		"body-5mib":         {Body: mib('Z') + mib('Z') + mib('Z') + mib('Z') + mib('Z')},
		"header-value-1mib": {Headers: map[string]string{"X-Big": mib('Z')}},
	}
	wants := map[string][]string{
		"url-1mib":          {"url"},
		"url-ftp":           {"url"},
		"url-nul":           {"url"},
		"url-no-host":       {"url"},
		"method-fetch":      {"method"},
		"method-1mib":       {"method"},
		"header-name-1mib":  {"header"},
		"header-crlf":       {`"X-Id"`},
		"header-dup":        {"same name ignoring case"},
		"schedule-40-days":  {"schedule_time"},
		"deadline-1h":       {"dispatch"},
		"deadline-1s":       {"dispatch"},
		"body-5mib":         {"TASK_TOO_LARGE", "bytes in wire format"},
		"header-value-1mib": {"header"},
	}
	var runErr error
	runAll := func(t *testing.T) {
		{
			srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
			t.Cleanup(func() { srv.Close() })
			all := []any{hostileElem{Case: "fine", Body: "a well-formed element among them"}}
			if _, err := srv.CreateQueue("projects/p/locations/l/queues/hostile-fine"); err != nil {
				runErr = err
				return
			}
			for name, e := range elems {
				e.Case = name
				all = append(all, e)
				if _, err := srv.CreateQueue("projects/p/locations/l/queues/hostile-" + name); err != nil {
					runErr = err
					return
				}
			}
			p, s := beam.NewPipelineWithRoot()
			dl := cloudtasksio.Write(s, cloudtasksio.Config{
				QueueFn: hostileQueue,
				HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/", Body: formats.JSON(),
					Headers: map[string]string{"Content-Type": "application/json"}},
				OnFailure:        cloudtasksio.DeadLetter,
				EmulatorEndpoint: srv.Addr,
			}, beam.Create(s, all...))
			beam.ParDo(s, hostileRecord, dl)
			runErr = ptest.Run(p)
			if _, ok := hostileDeadLetters.Load("projects/p/locations/l/queues/hostile-fine"); ok {
				runErr = errors.New("the well-formed element was dead-lettered")
			} else if n := len(srv.Tasks("projects/p/locations/l/queues/hostile-fine")); runErr == nil && n != 1 {
				runErr = fmt.Errorf("the well-formed element made %d tasks, want 1", n)
			}
		}
	}
	var out []hostileCase
	for name := range elems {
		out = append(out, hostileCase{kind: "element", name: name, want: wants[name], run: func(t *testing.T) string {
			if runErr != nil {
				return "the pipeline failed, so an element failed its bundle under DeadLetter: " + runErr.Error()
			}
			v, ok := hostileDeadLetters.Load("projects/p/locations/l/queues/hostile-" + name)
			if !ok {
				return "" // no dead letter: the element was accepted
			}
			fe := v.(deadletter.FailedElement)
			return fe.Code + ": " + fe.Error
		}})
	}
	return out, runAll
}

// --- the standalone emulator's flags and environment variables ---

var (
	emulatorBinOnce sync.Once
	emulatorBin     string
	emulatorBinErr  error
)

// buildEmulator builds the emulator command once per test binary.
func buildEmulator(t *testing.T) string {
	emulatorBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hostile-emulator")
		if err != nil {
			emulatorBinErr = err
			return
		}
		emulatorBin = filepath.Join(dir, "cloudtasks-emulator")
		cmd := exec.Command("go", "build", "-o", emulatorBin, "./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			emulatorBinErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, emulatorBinErr, "building the emulator")
	return emulatorBin
}

func hostileEmulatorCases() []hostileCase {
	row := func(name, want string, env map[string]string, args ...string) hostileCase {
		return hostileCase{kind: "emulator", name: name, want: []string{want}, run: func(t *testing.T) string {
			bin := buildEmulator(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, ok := env["PORT"]; !ok {
				args = append([]string{"-port", "0"}, args...) // nothing listens on 8123 if accepted
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				return "" // accepted (or killed at the time limit): no usage error
			}
			// The usage text may come first; the error is the last line.
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(out) > 16<<10 {
				return "the output is " + fmt.Sprint(len(out)) + " bytes long"
			}
			return lines[len(lines)-1]
		}}
	}
	return []hostileCase{
		row("PORT abc", "PORT", map[string]string{"PORT": "abc"}),
		row("PORT 70000", "PORT", map[string]string{"PORT": "70000"}),
		row("PORT 1 MiB", "PORT", map[string]string{"PORT": strings.Repeat("M", 100_000)}),
		row("-port abc", "-port", nil, "-port", "abc"),
		row("HOST 100 KB", "HOST", map[string]string{"HOST": strings.Repeat("M", 100_000)}),
		row("HOST with a slash", "HOST", map[string]string{"HOST": "127.0.0.1/8"}),
		row("INITIAL_QUEUES malformed", "INITIAL_QUEUES", map[string]string{"INITIAL_QUEUES": "projects/p/queues/q"}),
		row("INITIAL_QUEUES second item 100 KB", "INITIAL_QUEUES (item 2)", map[string]string{"INITIAL_QUEUES": "projects/p/locations/l/queues/a," + strings.Repeat("M", 100_000)}),
		row("-queue 100 KB", "-queue", nil, "-queue", strings.Repeat("M", 100_000)),
		row("-queue twice", "given twice", nil, "-queue", "projects/p/locations/l/queues/a", "-queue", "projects/p/locations/l/queues/a"),
		row("-create-quota 100 KB", "-create-quota", nil, "-create-quota", strings.Repeat("M", 100_000)),
		row("-create-quota queue 100 KB", "-create-quota", nil, "-create-quota", strings.Repeat("M", 100_000)+"=10"),
		row("-create-quota not a rate", "-create-quota", nil, "-create-quota", "fast"),
		row("HARD_RESET_ON_PURGE maybe", "HARD_RESET_ON_PURGE", map[string]string{"HARD_RESET_ON_PURGE": "maybe"}),
		row("OPENID_ISSUER with a password", "OPENID_ISSUER", map[string]string{"OPENID_ISSUER": "http://u:" + hostileSecret + "@127.0.0.1:8980"}),
		row("OIDC_KEY_FILE missing", "OIDC_KEY_FILE", map[string]string{"OIDC_KEY_FILE": "/nonexistent/" + strings.Repeat("M", 1000)}),
		row("APP_ENGINE_EMULATOR_HOST with a password", "APP_ENGINE_EMULATOR_HOST", map[string]string{"APP_ENGINE_EMULATOR_HOST": "ftp://u:" + hostileSecret + "@h"}),
		row("-log-level 100 KB", "-log-level", nil, "-log-level", strings.Repeat("M", 100_000)),
		row("unknown flag 100 KB", "flag provided but not defined", nil, "-"+strings.Repeat("M", 100_000)),
		row("-create-latency 100 KB", "-create-latency", nil, "-create-latency", strings.Repeat("M", 100_000)),
	}
}

// --- the template's flags (examples/kafka-to-cloudtasks/kafkatemplate) ---

func hostileTemplateCases() []hostileCase {
	sink := sinkArgs("project=p", "location=l", "queue=q", "http.url=https://example.com/")
	row := func(name, want string, args ...string) hostileCase {
		return hostileCase{kind: "template", name: name, want: []string{want}, run: func(*testing.T) string {
			fs := flag.NewFlagSet("kafka-to-cloudtasks", flag.ContinueOnError)
			fs.SetOutput(&strings.Builder{})
			opts := kafkatemplate.RegisterFlags(fs)
			if err := fs.Parse(append(append([]string{}, sink...), args...)); err != nil {
				return err.Error()
			}
			opts.Stdin = strings.NewReader("x\n")
			_, s := beam.NewPipelineWithRoot()
			return errText(kafkatemplate.Build(s, *opts))
		}}
	}
	flagOf := kafkatemplate.SinkFlagName
	return []hostileCase{
		row("headers not JSON", "--"+flagOf("http.headers"), "--"+flagOf("http.headers")+"=not json"),
		row("header name 1 MiB", "--"+flagOf("http.headers"), "--"+flagOf("http.headers")+`={"`+mib('Z')+`":"v"}`),
		row("header value with CRLF", "--"+flagOf("http.headers"), "--"+flagOf("http.headers")+`={"X-Id":"a\r\nInjected: yes"}`),
		row("format 1 MiB", "--format", "--format", mib('Z')),
		row("on_failure 1 MiB", "--on_failure", "--on_failure", mib('Z')),
		row("start offset 1 MiB", "--kafka_start_offset", "--kafka_bootstrap_servers=127.0.0.1:9092", "--kafka_topics=t", "--kafka_start_offset="+mib('Z')),
		row("consumer property name 1 MiB", "--kafka_consumer_properties", "--kafka_bootstrap_servers=127.0.0.1:9092", "--kafka_topics=t", `--kafka_consumer_properties={"`+mib('Z')+`":1,"`+mib('Z')+`":2}`),
		row("dead-letter topic 1 MiB", "--dead_letter_topic", "--on_failure=dead-letter", "--dead_letter_topic="+mib('Z')),
		row("dead-letter emulator with a scheme", "--dead_letter_emulator_endpoint", "--on_failure=dead-letter", "--dead_letter_topic=projects/p/topics/dead", "--dead_letter_emulator_endpoint=http://127.0.0.1:8085"),
		row("sink emulator with a token", "--"+flagOf("emulator-endpoint"), "--"+flagOf("emulator-endpoint")+"=u:"+hostileSecret+"@127.0.0.1:8123"),
		row("max tasks not a number", "--"+flagOf("sink.in-flight.max-tasks"), "--"+flagOf("sink.in-flight.max-tasks")+"="+mib('Z')),
		row("project 1 MiB", "--"+flagOf("project"), "--"+flagOf("project")+"="+mib('Z')),
		row("impersonation e-mail 1 MiB", "--"+flagOf("client.impersonate-service-account"), "--"+flagOf("client.impersonate-service-account")+"="+mib('Z')+"@p.iam.gserviceaccount.com"),
	}
}
