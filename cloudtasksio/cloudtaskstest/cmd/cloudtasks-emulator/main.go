// Command cloudtasks-emulator runs cloudtaskstest as a standalone Cloud Tasks
// emulator: the v2 gRPC API (and v2beta3 GetQueue) on a local port, with
// HTTP dispatch of the tasks of running queues. Any language's Cloud Tasks
// client can use it through an insecure channel without credentials.
//
//	go run ./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator \
//	    -port 8123 -queue projects/dev/locations/here/queues/orders
//
// It stands in for the community emulator (github.com/aertje/cloud-tasks-emulator):
// it takes the same flags
//
//	-host                       address to listen on (default 127.0.0.1)
//	-port                       port to listen on (default 8123; 0 picks a free one)
//	-queue, -initial-queue      a queue to create at start, repeatable
//	-openid-issuer              iss of the OIDC tokens (default http://cloud-tasks-emulator);
//	                            also serves the OpenID discovery document, /jwks
//	                            and /certs on that URL's port
//	-hard-reset-on-purge-queue  PurgeQueue forgets the purged task names
//
// the same environment variables (HOST, PORT, INITIAL_QUEUES as a comma
// separated list, OPENID_ISSUER, HARD_RESET_ON_PURGE_QUEUE or
// HARD_RESET_ON_PURGE; a flag on the command line wins over its variable),
// and flags of its own:
//
//	-oidc-key-file              PEM file of the RSA key that signs OIDC tokens (env OIDC_KEY_FILE)
//	-loopback-only              dispatch only to loopback targets
//	-log-level                  debug, info (default), warn or error
//	-create-quota [QUEUE=]RATE[/BURST]
//	                            answer CreateTask RESOURCE_EXHAUSTED above RATE creates
//	                            per second per queue (a token bucket of BURST, default
//	                            RATE rounded up); for QUEUE only, or every queue; repeatable
//	-create-quota-retry-info    quota rejections carry a google.rpc.RetryInfo delay (with -create-quota only)
//	-create-latency DURATION    delay every CreateTask answer by DURATION (such as 30ms),
//	                            rejected or not, as a distant region would
//	-create-refuse SHARE        answer RESOURCE_EXHAUSTED to that share of the CreateTask
//	                            calls (0.02 or 2%), drawn at random whatever their rate
//	-create-refuse-burst N[@DELAY]
//	                            answer RESOURCE_EXHAUSTED to the N CreateTask calls that
//	                            arrive from DELAY (default 0) after the first one
//	-no-dispatch                store tasks without dispatching them (load tests)
//	-stats-on-exit              on SIGINT or SIGTERM, print the server's counters (tasks
//	                            created, quota rejections, refusals as InjectedErrors, ...)
//	                            as one JSON line on stdout,
//	                            after "cloudtasks-emulator stats "
//
// It serves gRPC server reflection, so grpcurl lists and calls the services
// without the proto files:
//
//	grpcurl -plaintext 127.0.0.1:8123 list
//	grpcurl -plaintext -d '{"parent":"projects/dev/locations/here"}' \
//	    127.0.0.1:8123 google.cloud.tasks.v2.CloudTasks/ListQueues
//
// A bad flag or variable is reported under the name it was given by (-port or
// PORT, -queue or INITIAL_QUEUES), with what is accepted and at most a short
// cut of the value (of an -openid-issuer URL, never its user info, query or
// fragment). Every value, the queues included, is checked before the port is
// taken, so a wrong one is not hidden behind "address already in use".
//
// App Engine tasks go to APP_ENGINE_EMULATOR_HOST (for example
// http://localhost:8080) plus their relative URI, with the routing in the
// Host header; without it they are stored but not dispatched.
//
// It prints "cloudtasks-emulator listening on HOST:PORT" on stdout once it
// serves, logs one line per queue created and per dispatch attempt on
// stderr, and exits with status 0 on SIGINT or SIGTERM, 2 on a bad flag or
// variable. The Dockerfile beside this file builds it into an image.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "cloudtasks-emulator:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "cloudtasks-emulator:", err)
		os.Exit(1)
	}
}

// errUsage marks a command line the emulator cannot run with (exit status
// 2): a bad flag, a bad flag value, a stray argument.
var errUsage = errors.New("usage")

// usageError is a bad flag value; errors.Is(err, errUsage) holds for it.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// maxEcho bounds how much of a bad value an error repeats: enough to recognise it, never a
// whole hostile or mistaken megabyte.
const maxEcho = 120

// shown quotes a value for an error, cut to maxEcho bytes.
func shown(v string) string { return strconv.Quote(boundedtext.Cut(v, maxEcho)) }

// setting is one value of a flag and where it came from: "-port" when the command line set
// it, "PORT" when the environment did. Errors name the source, so that a user who set a
// variable is not told about a flag they never typed.
type setting struct{ value, from string }

// badf reports a bad value of s as a usage error that names its source and repeats the value
// cut short: `PORT "abc": want ...`.
func (s setting) badf(format string, args ...any) error {
	return usagef("%s %s: %s", s.from, shown(s.value), fmt.Sprintf(format, args...))
}

// settingFlag is a flag whose value is checked after parsing, so that the check can name
// where the value came from. Its Set never fails: the flag package would echo a bad value in
// full.
type settingFlag struct {
	name    string
	s       *setting
	boolean bool
}

func (f *settingFlag) String() string {
	if f == nil || f.s == nil {
		return ""
	}
	return f.s.value
}

func (f *settingFlag) Set(v string) error { *f.s = setting{v, "-" + f.name}; return nil }

// IsBoolFlag lets a boolean flag stand alone ("-hard-reset-on-purge-queue").
func (f *settingFlag) IsBoolFlag() bool { return f != nil && f.boolean }

// listFlag collects a repeatable flag; each value keeps its source.
type listFlag struct {
	name  string
	items *[]setting
}

func (f *listFlag) String() string {
	if f == nil || f.items == nil {
		return ""
	}
	vals := make([]string, len(*f.items))
	for i, it := range *f.items {
		vals[i] = it.value
	}
	return strings.Join(vals, ",")
}

func (f *listFlag) Set(v string) error {
	*f.items = append(*f.items, setting{v, "-" + f.name})
	return nil
}

// communityIssuer is the iss of the community emulator's tokens when no
// -openid-issuer is given; this emulator uses it too, so handlers that check
// it keep working after the switch.
const communityIssuer = "http://cloud-tasks-emulator"

// envFlags are the community emulator's environment variables (read by its
// container's start script), each standing for a flag. A variable sets the
// flag's default; the command line still wins. INITIAL_QUEUES is a comma
// separated list of queues.
var envFlags = []struct{ env, flag string }{
	{"HOST", "host"},
	{"PORT", "port"},
	{"INITIAL_QUEUES", "queue"},
	{"OPENID_ISSUER", "openid-issuer"},
	{"HARD_RESET_ON_PURGE_QUEUE", "hard-reset-on-purge-queue"},
	{"HARD_RESET_ON_PURGE", "hard-reset-on-purge-queue"}, // the spelling in that emulator's README
	{"OIDC_KEY_FILE", "oidc-key-file"},
}

// parseBool reads a boolean setting as the flag package does.
func parseBool(s setting) (bool, error) {
	b, err := strconv.ParseBool(s.value)
	if err != nil {
		return false, s.badf("want true or false (also 1, 0, t, f)")
	}
	return b, nil
}

// parsePort reads the port setting: a whole number from 0 to 65535.
func parsePort(s setting) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s.value))
	if err != nil || n < 0 || n > 65535 {
		return 0, s.badf("want a port number from 0 to 65535 (0 picks a free port)")
	}
	return n, nil
}

// queueError explains why the emulator could not create a queue a setting named, in plain
// words: the status message without the gRPC wrapping ("rpc error: code = ... desc = ..."),
// which means nothing to someone starting the emulator.
func queueError(s setting, err error) error {
	if status.Code(err) == codes.AlreadyExists {
		return s.badf("the queue is given twice (once is enough)")
	}
	msg := status.Convert(err).Message()
	msg = strings.TrimPrefix(msg, "queue.name: ")
	return s.badf("%s; want a queue path projects/PROJECT/locations/LOCATION/queues/QUEUE, such as %s", boundedtext.Cut(msg, 400), exampleQueue)
}

// flagValueError matches the flag package's error for a value a typed flag cannot parse.
var flagValueError = regexp.MustCompile(`(?s)^invalid (boolean )?value "(.*)" for (?:flag )?-([^:]+): (.*)$`)

// flagParseError rewords an error of the flag package so that it names the flag first and
// repeats at most a cut of the value: the package itself quotes the value whole.
func flagParseError(err error) string {
	m := flagValueError.FindStringSubmatch(err.Error())
	if m == nil {
		return boundedtext.Cut(err.Error(), 300)
	}
	boolean, flagName, why := m[1] != "", m[3], m[4]
	value, _ := strconv.Unquote(`"` + m[2] + `"`)
	switch {
	case why == "parse error" && boolean:
		why = "want true or false (also 1, 0, t, f)"
	case why == "parse error":
		why = "not a value of the flag's type (see the usage above)"
	}
	return fmt.Sprintf("-%s %s: %s", boundedtext.Cut(flagName, maxEcho), shown(value), boundedtext.Cut(why, 200))
}

// exampleQueue is the queue path errors show as an example.
const exampleQueue = "projects/dev/locations/here/queues/orders"

// run starts the emulator and serves until ctx is done. The line giving the
// address it listens on goes to out; logs go to logOut.
func run(ctx context.Context, args []string, getenv func(string) string, out, logOut io.Writer) error {
	fs := flag.NewFlagSet("cloudtasks-emulator", flag.ContinueOnError)
	// The flag package's own messages go to a buffer: they repeat a bad flag name in full, so
	// the emulator prints its own, cut short.
	var flagOut bytes.Buffer
	fs.SetOutput(&flagOut)
	host := setting{"127.0.0.1", "-host"}
	port := setting{"8123", "-port"}
	issuer := setting{"", "-openid-issuer"}
	keyFile := setting{"", "-oidc-key-file"}
	hardReset := setting{"false", "-hard-reset-on-purge-queue"}
	var queues []setting
	fs.Var(&settingFlag{name: "host", s: &host}, "host", "address to listen on (default 127.0.0.1; env HOST)")
	fs.Var(&settingFlag{name: "port", s: &port}, "port", "port to listen on, 0 picks a free one (default 8123; env PORT)")
	fs.Var(&listFlag{name: "queue", items: &queues}, "queue", "queue to create at start, as projects/P/locations/L/queues/Q; repeatable (env INITIAL_QUEUES, comma separated)")
	fs.Var(&listFlag{name: "initial-queue", items: &queues}, "initial-queue", "same as -queue")
	fs.Var(&settingFlag{name: "openid-issuer", s: &issuer}, "openid-issuer", "iss claim of OIDC tokens (default "+communityIssuer+"); when set, the OpenID discovery document and keys are served on this URL's port (env OPENID_ISSUER)")
	fs.Var(&settingFlag{name: "oidc-key-file", s: &keyFile}, "oidc-key-file", "PEM file of the RSA key that signs OIDC tokens; default: a new key at each start (env OIDC_KEY_FILE)")
	fs.Var(&settingFlag{name: "hard-reset-on-purge-queue", s: &hardReset, boolean: true}, "hard-reset-on-purge-queue", "PurgeQueue forgets the purged task names instead of keeping them taken for an hour (env HARD_RESET_ON_PURGE_QUEUE)")
	loopbackOnly := fs.Bool("loopback-only", false, "dispatch only to loopback targets")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	var quotas []setting
	fs.Var(&listFlag{name: "create-quota", items: &quotas}, "create-quota", "per-queue CreateTask quota as [QUEUE=]RATE[/BURST]: RESOURCE_EXHAUSTED above RATE creates per second, in bursts of BURST (default RATE rounded up); without QUEUE for every queue; repeatable")
	quotaRetryInfo := fs.Bool("create-quota-retry-info", false, "quota rejections carry a google.rpc.RetryInfo detail with the delay until the next token")
	createLatency := fs.Duration("create-latency", 0, "delay every CreateTask call by this long before it is answered, rejected or not, such as 30ms (0: none)")
	refuse := fs.String("create-refuse", "", "answer RESOURCE_EXHAUSTED to this share of the CreateTask calls, drawn at random whatever their rate, such as 0.02 or 2%")
	refuseBurst := fs.String("create-refuse-burst", "", "answer RESOURCE_EXHAUSTED to N CreateTask calls in a row, given as N[@DELAY]: those arriving from DELAY (default 0) after the first one, such as 40@2s")
	noDispatch := fs.Bool("no-dispatch", false, "store tasks without dispatching them, for load tests that must not call any target")
	statsOnExit := fs.Bool("stats-on-exit", false, "when stopped, print the server's counters (cloudtaskstest.Stats) as one JSON line on stdout, after \"cloudtasks-emulator stats \"")
	byFlag := map[string]*setting{"host": &host, "port": &port, "openid-issuer": &issuer, "oidc-key-file": &keyFile, "hard-reset-on-purge-queue": &hardReset}
	for _, ef := range envFlags {
		v := strings.TrimSpace(getenv(ef.env))
		if v == "" {
			continue
		}
		if ef.flag != "queue" {
			*byFlag[ef.flag] = setting{v, ef.env}
			continue
		}
		for i, one := range strings.Split(v, ",") {
			from := ef.env
			if strings.Contains(v, ",") {
				from = fmt.Sprintf("%s (item %d)", ef.env, i+1)
			}
			queues = append(queues, setting{strings.TrimSpace(one), from})
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = io.Copy(logOut, &flagOut)
			return err
		}
		fs.SetOutput(logOut)
		fs.Usage()
		return usagef("%s", flagParseError(err))
	}
	if fs.NArg() > 0 {
		fs.SetOutput(logOut)
		fs.Usage()
		return usagef("unexpected argument %s: the emulator takes flags only", shown(fs.Arg(0)))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usagef("-log-level %s: want debug, info, warn or error", shown(*level))
	}
	portN, err := parsePort(port)
	if err != nil {
		return err
	}
	if strings.TrimSpace(host.value) == "" || strings.ContainsAny(host.value, " \t\r\n/\x00") || len(host.value) > 253 {
		return host.badf("want a host name or IP address to listen on, such as 127.0.0.1 or 0.0.0.0")
	}
	reset, err := parseBool(hardReset)
	if err != nil {
		return err
	}
	if *createLatency < 0 || *createLatency > maxCreateLatency {
		return usagef("-create-latency %v: want a duration from 0 to %v, such as 30ms", *createLatency, maxCreateLatency)
	}
	if *quotaRetryInfo && len(quotas) == 0 {
		return usagef("-create-quota-retry-info: there is no quota to reject with it; give -create-quota too")
	}
	refusals, err := refusalReactors(*refuse, *refuseBurst)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: lvl}))

	opts := []cloudtaskstest.Option{cloudtaskstest.WithLogger(log), cloudtaskstest.WithOIDCIssuer(communityIssuer)}
	if keyFile.value != "" {
		if strings.ContainsRune(keyFile.value, 0) {
			return keyFile.badf("a file path cannot hold a NUL byte")
		}
		opts = append(opts, cloudtaskstest.WithOIDCKeyFile(keyFile.value))
	}
	if !*loopbackOnly {
		opts = append(opts, cloudtaskstest.WithDispatchToAnyHost())
	}
	if reset {
		opts = append(opts, cloudtaskstest.WithHardResetOnPurge())
	}
	if *noDispatch {
		opts = append(opts, cloudtaskstest.WithoutDispatch())
	}
	if ae := strings.TrimSpace(getenv("APP_ENGINE_EMULATOR_HOST")); ae != "" {
		if !strings.Contains(ae, "://") {
			ae = "http://" + ae
		}
		opts = append(opts, cloudtaskstest.WithAppEngineURL(ae))
	}
	for _, v := range quotas {
		o, err := parseQuota(v, *quotaRetryInfo)
		if err != nil {
			return err
		}
		opts = append(opts, o)
	}
	var issuerPort string
	if issuer.value != "" {
		if issuerPort, err = issuerListenPort(issuer); err != nil {
			return err
		}
		opts = append(opts, cloudtaskstest.WithOIDCIssuer(strings.TrimSuffix(issuer.value, "/")))
	}

	// Everything is checked before the port is taken, the queues included: a wrong value is
	// reported as such even when the port is in use.
	srv, err := cloudtaskstest.NewUnstartedServer(opts...)
	if err != nil {
		// An option the settings built is unusable: name the setting that built it.
		var oe *cloudtaskstest.OptionError
		if errors.As(err, &oe) {
			switch oe.Option {
			case "WithOIDCKeyFile":
				return usagef("%s: %v", keyFile.from, oe)
			case "WithCreateQuota": // a malformed QUEUE
				return usagef("-create-quota: %v", oe)
			case "WithAppEngineURL":
				return usagef("APP_ENGINE_EMULATOR_HOST: %v; want host:port or an http(s) URL, such as localhost:8080", oe)
			}
		}
		return err
	}
	defer srv.Close()
	srv.SetLatency(*createLatency)
	for _, r := range refusals {
		srv.AddReactor("CreateTask", r)
	}
	for _, q := range queues {
		if _, err := srv.CreateQueue(q.value); err != nil {
			return queueError(q, err)
		}
	}
	if err := srv.Start(net.JoinHostPort(host.value, strconv.Itoa(portN))); err != nil {
		return fmt.Errorf("listen on %s (from %s and %s): %s", shown(net.JoinHostPort(host.value, strconv.Itoa(portN))), host.from, port.from, boundedtext.Cut(err.Error(), 400))
	}

	if issuerPort != "" {
		lis, err := net.Listen("tcp", net.JoinHostPort(host.value, issuerPort))
		if err != nil {
			return fmt.Errorf("%s: serve discovery: %w", issuer.from, err)
		}
		hs := &http.Server{Handler: srv.OpenIDHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(lis) }()
		defer hs.Close()
		log.Info("serving OpenID discovery", "issuer", issuer.value, "addr", lis.Addr().String())
	}

	log.Info("listening", "addr", srv.Addr, "queues", len(queues))
	// Whatever the log level, say where to connect: with -port 0 nothing
	// else tells.
	fmt.Fprintf(out, "cloudtasks-emulator listening on %s\n", srv.Addr)
	<-ctx.Done()
	log.Info("shutting down")
	if *statsOnExit {
		// Counters only: no task, name or payload is in them.
		js, err := json.Marshal(srv.Stats())
		if err != nil {
			return fmt.Errorf("-stats-on-exit: %w", err)
		}
		fmt.Fprintf(out, "%s%s\n", statsPrefix, js)
	}
	return nil
}

// statsPrefix starts the line -stats-on-exit prints.
const statsPrefix = "cloudtasks-emulator stats "

// maxCreateLatency bounds -create-latency: the client's default CreateTask
// timeout is 20s, so a longer delay would only time every create out.
const maxCreateLatency = 20 * time.Second

// parseQuota reads a -create-quota value, [QUEUE=]RATE[/BURST].
func parseQuota(s setting, retryInfo bool) (cloudtaskstest.Option, error) {
	v := s.value
	bad := func(why string) error {
		return s.badf("%s; want [projects/P/locations/L/queues/Q=]RATE[/BURST], such as 300 or projects/p/locations/l/queues/q=300/50", why)
	}
	queue, spec := cloudtaskstest.AllQueues, v
	if q, rest, ok := strings.Cut(v, "="); ok {
		queue, spec = q, rest
	}
	rateText, burstText, hasBurst := strings.Cut(spec, "/")
	rate, err := strconv.ParseFloat(rateText, 64)
	if err != nil || rate <= 0 || math.IsInf(rate, 0) {
		return nil, bad("RATE is not a number above zero")
	}
	q := cloudtaskstest.CreateQuota{PerSecond: rate, RetryInfo: retryInfo}
	if hasBurst {
		if q.Burst, err = strconv.Atoi(burstText); err != nil || q.Burst < 1 {
			return nil, bad("BURST is not a whole number above zero")
		}
	}
	return cloudtaskstest.WithCreateQuota(queue, q), nil
}
