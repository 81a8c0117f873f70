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
//	-create-quota-retry-info    quota rejections carry a google.rpc.RetryInfo delay
//	-create-latency DURATION    delay every CreateTask answer by DURATION (such as 30ms),
//	                            rejected or not, as a distant region would
//	-no-dispatch                store tasks without dispatching them (load tests)
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
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		if err != errUsage { // the flag package has printed its own
			fmt.Fprintln(os.Stderr, "cloudtasks-emulator:", err)
		}
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

// queueFlags collects a repeatable flag.
type queueFlags []string

func (q *queueFlags) String() string     { return strings.Join(*q, ",") }
func (q *queueFlags) Set(v string) error { *q = append(*q, v); return nil }

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

// run starts the emulator and serves until ctx is done. The line giving the
// address it listens on goes to out; logs go to logOut.
func run(ctx context.Context, args []string, getenv func(string) string, out, logOut io.Writer) error {
	fs := flag.NewFlagSet("cloudtasks-emulator", flag.ContinueOnError)
	fs.SetOutput(logOut)
	host := fs.String("host", "127.0.0.1", "address to listen on (env HOST)")
	port := fs.Int("port", 8123, "port to listen on, 0 picks a free one (env PORT)")
	var queues queueFlags
	fs.Var(&queues, "queue", "queue to create at start, as projects/P/locations/L/queues/Q; repeatable (env INITIAL_QUEUES, comma separated)")
	fs.Var(&queues, "initial-queue", "same as -queue")
	issuer := fs.String("openid-issuer", "", "iss claim of OIDC tokens (default "+communityIssuer+"); when set, the OpenID discovery document and keys are served on this URL's port (env OPENID_ISSUER)")
	keyFile := fs.String("oidc-key-file", "", "PEM file of the RSA key that signs OIDC tokens; default: a new key at each start (env OIDC_KEY_FILE)")
	hardReset := fs.Bool("hard-reset-on-purge-queue", false, "PurgeQueue forgets the purged task names instead of keeping them taken for an hour (env HARD_RESET_ON_PURGE_QUEUE)")
	loopbackOnly := fs.Bool("loopback-only", false, "dispatch only to loopback targets")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	var quotas queueFlags
	fs.Var(&quotas, "create-quota", "per-queue CreateTask quota as [QUEUE=]RATE[/BURST]: RESOURCE_EXHAUSTED above RATE creates per second, in bursts of BURST (default RATE rounded up); without QUEUE for every queue; repeatable")
	quotaRetryInfo := fs.Bool("create-quota-retry-info", false, "quota rejections carry a google.rpc.RetryInfo detail with the delay until the next token")
	createLatency := fs.Duration("create-latency", 0, "delay every CreateTask call by this long before it is answered, rejected or not, such as 30ms (0: none)")
	noDispatch := fs.Bool("no-dispatch", false, "store tasks without dispatching them, for load tests that must not call any target")
	for _, ef := range envFlags {
		v := strings.TrimSpace(getenv(ef.env))
		if v == "" {
			continue
		}
		vals := []string{v}
		if ef.flag == "queue" {
			vals = strings.Split(v, ",")
		}
		for _, one := range vals {
			if err := fs.Set(ef.flag, strings.TrimSpace(one)); err != nil {
				return usagef("environment variable %s: %v", ef.env, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(logOut, "unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usagef("-log-level %q: want debug, info, warn or error", *level)
	}
	if *port < 0 || *port > 65535 {
		return usagef("-port %d: want 0 to 65535", *port)
	}
	if *createLatency < 0 || *createLatency > maxCreateLatency {
		return usagef("-create-latency %v: want a duration from 0 to %v, such as 30ms", *createLatency, maxCreateLatency)
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: lvl}))

	opts := []cloudtaskstest.Option{cloudtaskstest.WithLogger(log), cloudtaskstest.WithOIDCIssuer(communityIssuer)}
	if *keyFile != "" {
		opts = append(opts, cloudtaskstest.WithOIDCKeyFile(*keyFile))
	}
	if !*loopbackOnly {
		opts = append(opts, cloudtaskstest.WithDispatchToAnyHost())
	}
	if *hardReset {
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
	if *issuer != "" {
		var err error
		if issuerPort, err = issuerListenPort(*issuer); err != nil {
			return err
		}
		opts = append(opts, cloudtaskstest.WithOIDCIssuer(strings.TrimSuffix(*issuer, "/")))
	}

	srv, err := cloudtaskstest.NewServerWithAddress(net.JoinHostPort(*host, strconv.Itoa(*port)), opts...)
	if err != nil {
		// An option the flags built is unusable: name the flag that built it.
		var oe *cloudtaskstest.OptionError
		if errors.As(err, &oe) {
			switch oe.Option {
			case "WithOIDCKeyFile":
				return usagef("-oidc-key-file: %v", err)
			case "WithCreateQuota": // a malformed QUEUE
				return usagef("-create-quota: %v", err)
			}
		}
		return err
	}
	defer srv.Close()
	srv.SetLatency(*createLatency)
	for _, q := range queues {
		if _, err := srv.CreateQueue(q); err != nil {
			return usagef("-queue %q: %v", q, err)
		}
	}

	if issuerPort != "" {
		lis, err := net.Listen("tcp", net.JoinHostPort(*host, issuerPort))
		if err != nil {
			return fmt.Errorf("-openid-issuer: serve discovery: %w", err)
		}
		hs := &http.Server{Handler: srv.OpenIDHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(lis) }()
		defer hs.Close()
		log.Info("serving OpenID discovery", "issuer", *issuer, "addr", lis.Addr().String())
	}

	log.Info("listening", "addr", srv.Addr, "queues", len(queues))
	// Whatever the log level, say where to connect: with -port 0 nothing
	// else tells.
	fmt.Fprintf(out, "cloudtasks-emulator listening on %s\n", srv.Addr)
	<-ctx.Done()
	log.Info("shutting down")
	return nil
}

// maxCreateLatency bounds -create-latency: the client's default CreateTask
// timeout is 20s, so a longer delay would only time every create out.
const maxCreateLatency = 20 * time.Second

// issuerListenPort checks an -openid-issuer value and returns the port its
// discovery document is served on. An OpenID issuer is an http(s) URL with a
// host, an optional path, and no user info, query or fragment; its port must
// be fixed, since clients find the keys through it.
func issuerListenPort(issuer string) (string, error) {
	shown := issuer
	bad := func(why string) error {
		return usagef("-openid-issuer %q: %s; want an http(s) URL such as http://localhost:8980", shown, why)
	}
	u, err := url.Parse(issuer)
	if err == nil && u.User != nil {
		shown = u.Redacted() // never echo a password
		return "", bad("user info is not allowed")
	}
	switch {
	case err != nil:
		return "", bad("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad("the scheme is not http or https")
	case u.Hostname() == "":
		return "", bad("no host")
	case u.RawQuery != "" || u.ForceQuery:
		return "", bad("a query is not allowed")
	case u.Fragment != "" || strings.Contains(issuer, "#"):
		return "", bad("a fragment is not allowed")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", bad("the port must be 1 to 65535")
	}
	return port, nil
}

// parseQuota reads a -create-quota value, [QUEUE=]RATE[/BURST].
func parseQuota(v string, retryInfo bool) (cloudtaskstest.Option, error) {
	bad := func(why string) error {
		return usagef("-create-quota %q: %s; want [projects/P/locations/L/queues/Q=]RATE[/BURST], such as 300 or projects/p/locations/l/queues/q=300/50", v, why)
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
