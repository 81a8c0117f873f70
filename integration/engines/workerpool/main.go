// Command workerpool is a Beam worker pool for Go SDK workers that listens on a loopback
// address only. A runner given `--environment_type=EXTERNAL --environment_config=<its address>`
// asks it to start a worker; it then does what Beam's Go container does at boot, on this
// machine and without Docker: it reads the worker's provisioning information from the runner,
// retrieves the staged worker binary (the pipeline's own binary, staged by the launcher's
// `--worker_binary`) into a directory of its own, and starts that binary in worker mode as a
// new process. So the pipeline's DoFns run in a process other than the launcher's, as they do
// on Dataflow and Flink. The pool itself is package internal/workerpool, which the
// cross-language expansion service runs too.
//
// It exists because Beam's own pool (the Go boot program's --worker_pool) always listens on
// port 50000 of every interface; .ci/engines starts this one on a free 127.0.0.1 port:
//
//	workerpool -addr 127.0.0.1:PORT -dir DIR
//
// Each worker gets a fresh directory under DIR (its staged files, its pipeline options, its
// working directory), removed when the worker exits. Every start, exit and stop is logged
// with the worker's process id. SIGINT or SIGTERM stops every worker and then the pool.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/workerpool"
)

func main() {
	addr := flag.String("addr", "", "loopback `host:port` to listen on, such as 127.0.0.1:0 (required)")
	dir := flag.String("dir", "", "`directory` under which each worker gets its own folder (required; created if missing)")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("workerpool: ")
	if err := run(*addr, *dir); err != nil {
		log.Fatal(err)
	}
}

func run(addr, dir string) error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: give -addr and -dir only", flag.Args())
	}
	if dir == "" {
		return fmt.Errorf("-dir is required: the directory under which each worker gets its own folder")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	lis, err := listenLoopback(addr)
	if err != nil {
		return err
	}
	p := workerpool.New(workerpool.Options{Dir: dir})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		log.Printf("stopping: %v", context.Cause(ctx))
		p.Stop()
	}()
	log.Printf("listening on %s (pid %d), workers under %s", lis.Addr(), os.Getpid(), dir)
	return p.Serve(lis)
}

// listenLoopback listens on addr, whose host must be a loopback IP address or "localhost".
func listenLoopback(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, fmt.Errorf("-addr is required: a loopback host:port such as 127.0.0.1:0")
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("-addr %q is not host:port: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("-addr %q: the host must be a loopback address (127.0.0.1, ::1 or localhost); the pool starts processes for whoever reaches it", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-addr: %w", err)
	}
	return lis, nil
}
