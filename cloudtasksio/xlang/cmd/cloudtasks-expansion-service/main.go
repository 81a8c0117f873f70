// Command cloudtasks-expansion-service offers cloudtasksio.Write to Python, Java and Beam YAML
// pipelines: it is a Beam expansion service for the schema transform
// beam:schematransform:beam-cloudtasks:cloudtasks_write:v1 (package
// github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/xlang), and the Go worker that runs
// the expanded steps.
//
//	cloudtasks-expansion-service --port 8097
//
// listens on 127.0.0.1:8097 (--host for another address; --port 0, the default, picks a free
// port) and prints the address it serves once ready. By default it also runs a Go worker pool
// on a free loopback port and answers with an EXTERNAL environment there, so that one command
// serves a pipeline on a local runner (Python's DirectRunner, its portable job service, Beam
// YAML): the pool starts this program as each Go worker. Other environments:
//
//	--worker_pool=HOST:PORT   EXTERNAL, a worker pool elsewhere (for example one next to each
//	                          Flink task manager); the pool must run this program's workers
//	--environment=docker      Beam's Go SDK container (--container_image, default
//	                          apache/beam_go_sdk of this module's Beam release), for Dataflow;
//	                          the worker binary is staged as the job's Go worker binary
//	--worker_binary=PATH      the Go worker binary the environment stages: this program built
//	                          for the workers' platform (default: this program)
//
// Started with Beam's worker flags (--worker=true ...) by a worker pool or by Beam's Go
// container, the same program is the Go SDK harness of the expanded steps. SIGINT or SIGTERM
// stops the service, its pool and the pool's workers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness/init" // the Go SDK harness of worker mode
	"google.golang.org/grpc"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/xlang"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/workerpool"
)

var (
	port         = flag.Int("port", 0, "`port` to serve expansion requests on (0: a free port, printed once ready)")
	host         = flag.String("host", "127.0.0.1", "`address` to listen on; another than loopback only when callers run elsewhere")
	environment  = flag.String("environment", "external", "environment of the expanded steps: external (a worker pool) or docker (Beam's Go SDK container, for Dataflow)")
	workerPool   = flag.String("worker_pool", "", "with --environment=external: `host:port` of a worker pool elsewhere; empty: run one on a free loopback port")
	image        = flag.String("container_image", "", "with --environment=docker: the Go SDK container `image` (default "+xlang.DefaultContainerImage+")")
	workerBinary = flag.String("worker_binary", "", "`path` of the Go worker binary the environment stages: this program built for the workers' platform (default: this program)")
)

func main() {
	flag.Parse()
	// Started as a Go worker (--worker=true), beam.Init runs the harness and never returns;
	// the pipeline options a Python runner provides are first made readable to it.
	if err := xlang.PrepareWorker(); err != nil {
		log.Fatalf("cloudtasks-expansion-service: %v", err)
	}
	beam.Init()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("cloudtasks-expansion-service: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see -help)", flag.Args())
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program, the Go worker: %w", err)
	}
	opts := xlang.Options{WorkerBinary: firstSet(*workerBinary, self)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var stopPool func()
	switch strings.ToLower(*environment) {
	case "external":
		if *image != "" {
			return errors.New("--container_image applies to --environment=docker")
		}
		opts.EnvironmentType, opts.EnvironmentConfig = xlang.EnvironmentExternal, *workerPool
		if *workerPool == "" {
			var addr string
			stopPool, addr, err = startPool(self)
			if err != nil {
				return err
			}
			defer stopPool()
			opts.EnvironmentConfig = addr
		}
	case "docker":
		if *workerPool != "" {
			return errors.New("--worker_pool applies to --environment=external")
		}
		opts.EnvironmentType, opts.EnvironmentConfig = xlang.EnvironmentDocker, *image
	default:
		return fmt.Errorf("--environment=%q: accepted: external, docker", *environment)
	}
	svc, err := xlang.NewService(opts)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("--host, --port: %w", err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20))
	svc.Register(srv)
	go func() {
		<-ctx.Done()
		log.Printf("stopping: %v", context.Cause(ctx))
		srv.Stop()
	}()
	fmt.Printf("cloudtasks-expansion-service: serving %s on %s (environment %s %s, pid %d)\n",
		xlang.Identifier, lis.Addr(), opts.EnvironmentType, opts.EnvironmentConfig, os.Getpid())
	return srv.Serve(lis)
}

// startPool runs a worker pool on a free loopback port whose workers are this program, with
// their folders under a temporary folder. stop stops the workers and the pool and removes the
// folder.
func startPool(self string) (stop func(), addr string, err error) {
	dir, err := os.MkdirTemp("", "cloudtasks-expansion-service-workers-")
	if err != nil {
		return nil, "", err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("the worker pool: %w", err)
	}
	pool := workerpool.New(workerpool.Options{Dir: dir, Binary: self, Logf: func(format string, args ...any) {
		log.Printf("worker pool: "+format, args...)
	}})
	go func() {
		if err := pool.Serve(lis); err != nil {
			log.Printf("worker pool: %v", err)
		}
	}()
	return func() {
		pool.Stop()
		_ = os.RemoveAll(dir)
	}, lis.Addr().String(), nil
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
