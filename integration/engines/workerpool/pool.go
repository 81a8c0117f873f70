package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/container/tools"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/artifact"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// provisionTimeout bounds what a start does before the worker process exists: reading the
// provisioning information and retrieving the staged files.
const provisionTimeout = 2 * time.Minute

// stopGrace is how long a worker may take to exit after SIGTERM before it is killed.
const stopGrace = 10 * time.Second

// The environment variables through which a Go SDK worker gets what its boot program would
// give it: the pipeline options (a file), and the runner's status endpoint and capabilities.
const (
	envOptionsFile        = "PIPELINE_OPTIONS_FILE"
	envStatusEndpoint     = "STATUS_ENDPOINT"
	envRunnerCapabilities = "RUNNER_CAPABILITIES"
)

// pool is the BeamFnExternalWorkerPool service: each StartWorker provisions a Go SDK worker
// and starts it as a process; StopWorker and Stop end them.
type pool struct {
	fnpb.UnimplementedBeamFnExternalWorkerPoolServer

	dir string // each worker's folder is made under it
	srv *grpc.Server

	mu       sync.Mutex
	workers  map[string]*worker // by worker id, from the start request until StopWorker
	stopping bool
}

// worker is one worker process the pool started.
type worker struct {
	id   string
	cmd  *exec.Cmd     // nil while the worker is being provisioned
	done chan struct{} // closed when the process has exited and its folder is removed
}

func newPool(dir string) *pool {
	p := &pool{dir: dir, srv: grpc.NewServer(), workers: map[string]*worker{}}
	fnpb.RegisterBeamFnExternalWorkerPoolServer(p.srv, p)
	return p
}

// Serve answers runners on lis until Stop.
func (p *pool) Serve(lis net.Listener) error { return p.srv.Serve(lis) }

// Stop refuses new workers, stops every running worker (SIGTERM, then SIGKILL after
// stopGrace) and closes the service.
func (p *pool) Stop() {
	p.mu.Lock()
	p.stopping = true
	var running []*worker
	for _, w := range p.workers {
		if w.cmd != nil {
			running = append(running, w)
		}
	}
	p.mu.Unlock()
	for _, w := range running {
		w.stop()
	}
	for _, w := range running {
		<-w.done
	}
	p.srv.Stop()
}

// StartWorker provisions the worker the runner asks for and starts it. A failure is answered
// in the response's Error, as the worker pool protocol wants, and logged.
func (p *pool) StartWorker(_ context.Context, req *fnpb.StartWorkerRequest) (*fnpb.StartWorkerResponse, error) {
	id := req.GetWorkerId()
	fail := func(format string, args ...any) (*fnpb.StartWorkerResponse, error) {
		msg := fmt.Sprintf("worker %q: ", id) + fmt.Sprintf(format, args...)
		log.Print(msg)
		return &fnpb.StartWorkerResponse{Error: msg}, nil
	}
	if id == "" {
		return fail("the request has no worker id")
	}
	for name, ep := range map[string]*pipepb.ApiServiceDescriptor{
		"control": req.GetControlEndpoint(), "logging": req.GetLoggingEndpoint(), "provision": req.GetProvisionEndpoint(),
	} {
		if ep.GetUrl() == "" {
			return fail("the request has no %s endpoint", name)
		}
		if ep.GetAuthentication() != nil {
			return fail("the %s endpoint asks for authentication, which this pool does not support", name)
		}
	}

	w := &worker{id: id, done: make(chan struct{})}
	p.mu.Lock()
	switch _, dup := p.workers[id]; {
	case p.stopping:
		p.mu.Unlock()
		return fail("the pool is stopping")
	case dup:
		p.mu.Unlock()
		return fail("a worker with this id was started already")
	}
	p.workers[id] = w
	p.mu.Unlock()

	cmd, wdir, err := p.provision(req)
	if err != nil {
		p.mu.Lock()
		delete(p.workers, id)
		p.mu.Unlock()
		return fail("%v", err)
	}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(wdir)
		p.mu.Lock()
		delete(p.workers, id)
		p.mu.Unlock()
		return fail("starting %s: %v", cmd.Path, err)
	}
	p.mu.Lock()
	w.cmd = cmd
	stopping := p.stopping
	p.mu.Unlock()
	log.Printf("worker %q started: pid %d (the pool is pid %d), binary %s", id, cmd.Process.Pid, os.Getpid(), cmd.Path)
	go func() {
		err := cmd.Wait()
		log.Printf("worker %q (pid %d) exited: %s", id, cmd.Process.Pid, exitText(err))
		if rmErr := os.RemoveAll(wdir); rmErr != nil {
			log.Printf("worker %q: removing %s: %v", id, wdir, rmErr)
		}
		close(w.done)
	}()
	if stopping { // Stop ran while this worker was provisioned and did not see it.
		w.stop()
	}
	return &fnpb.StartWorkerResponse{}, nil
}

// StopWorker stops the worker (SIGTERM, then SIGKILL after stopGrace) and forgets it. A worker
// that has exited already is answered with success.
func (p *pool) StopWorker(_ context.Context, req *fnpb.StopWorkerRequest) (*fnpb.StopWorkerResponse, error) {
	id := req.GetWorkerId()
	p.mu.Lock()
	w, ok := p.workers[id]
	if ok && w.cmd != nil {
		delete(p.workers, id)
	}
	p.mu.Unlock()
	switch {
	case !ok:
		return &fnpb.StopWorkerResponse{Error: fmt.Sprintf("no worker %q was started by this pool", id)}, nil
	case w.cmd == nil:
		return &fnpb.StopWorkerResponse{Error: fmt.Sprintf("worker %q is still being provisioned", id)}, nil
	}
	log.Printf("stopping worker %q (pid %d) at the runner's request", id, w.cmd.Process.Pid)
	w.stop()
	return &fnpb.StopWorkerResponse{}, nil
}

// stop sends the worker SIGTERM and, if it has not exited after stopGrace, SIGKILL. It does
// not wait.
func (w *worker) stop() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		select {
		case <-w.done:
		case <-time.After(stopGrace):
			log.Printf("worker %q (pid %d) did not exit %v after SIGTERM; killing it", w.id, w.cmd.Process.Pid, stopGrace)
			_ = w.cmd.Process.Kill()
		}
	}()
}

// provision does what Beam's Go boot program does before it runs the worker binary: it reads
// the provisioning information, retrieves the staged files into a new folder and writes the
// pipeline options there. It returns the worker's command, not yet started, and its folder.
func (p *pool) provision(req *fnpb.StartWorkerRequest) (*exec.Cmd, string, error) {
	id := req.GetWorkerId()
	wdir, err := os.MkdirTemp(p.dir, "worker-")
	if err != nil {
		return nil, "", err
	}
	cmd, err := func() (*exec.Cmd, error) {
		ctx, cancel := context.WithTimeout(context.Background(), provisionTimeout)
		defer cancel()
		ctx = grpcx.WriteWorkerID(ctx, id)
		info, err := tools.ProvisionInfo(ctx, req.GetProvisionEndpoint().GetUrl())
		if err != nil {
			return nil, fmt.Errorf("reading the provisioning information: %w", err)
		}
		// The provisioning information names the endpoints when the runner sets them there;
		// else the request's apply, as for Beam's boot program.
		control := firstSet(info.GetControlEndpoint().GetUrl(), req.GetControlEndpoint().GetUrl())
		logging := firstSet(info.GetLoggingEndpoint().GetUrl(), req.GetLoggingEndpoint().GetUrl())
		artifacts := firstSet(info.GetArtifactEndpoint().GetUrl(), req.GetArtifactEndpoint().GetUrl())
		if artifacts == "" {
			return nil, errors.New("neither the request nor the provisioning information names an artifact endpoint")
		}
		staged := filepath.Join(wdir, "staged")
		files, err := artifact.Materialize(ctx, artifacts, info.GetDependencies(), info.GetRetrievalToken(), staged)
		if err != nil {
			return nil, fmt.Errorf("retrieving the staged files: %w", err)
		}
		name, err := workerBinary(files)
		if err != nil {
			return nil, err
		}
		options, err := tools.ProtoToJSON(info.GetPipelineOptions())
		if err != nil {
			return nil, fmt.Errorf("reading the pipeline options: %w", err)
		}
		optionsFile := filepath.Join(wdir, "pipeline_options.json")
		if err := os.WriteFile(optionsFile, []byte(options), 0o600); err != nil {
			return nil, err
		}
		env := []string{envOptionsFile + "=" + optionsFile}
		if ep := info.GetStatusEndpoint().GetUrl(); ep != "" {
			env = append(env, envStatusEndpoint+"="+ep)
		}
		if caps := info.GetRunnerCapabilities(); len(caps) > 0 {
			env = append(env, envRunnerCapabilities+"="+strings.Join(caps, " "))
		}
		cmd := exec.Command(filepath.Join(staged, name),
			"--worker=true",
			"--id="+id,
			"--logging_endpoint="+logging,
			"--control_endpoint="+control,
			"--semi_persist_dir="+wdir,
		)
		cmd.Dir = wdir
		cmd.Env = append(inherited(), env...)
		cmd.Stdout = os.Stdout
		cmd.Stderr = os.Stderr
		return cmd, nil
	}()
	if err != nil {
		_ = os.RemoveAll(wdir)
		return nil, "", err
	}
	return cmd, wdir, nil
}

// workerBinary picks the Go worker binary among the retrieved files, as Beam's boot program
// does: the file whose role says so, else the only file, else the one named "worker". It
// returns the file's name under the staging folder.
func workerBinary(files []*pipepb.ArtifactInformation) (string, error) {
	var names []string
	for _, f := range files {
		var payload pipepb.ArtifactFilePayload
		if f.GetTypeUrn() != artifact.URNFileArtifact || proto.Unmarshal(f.GetTypePayload(), &payload) != nil {
			return "", fmt.Errorf("a retrieved artifact is not a file (type %q)", f.GetTypeUrn())
		}
		if f.GetRoleUrn() == artifact.URNGoWorkerBinaryRole {
			return payload.GetPath(), nil
		}
		names = append(names, payload.GetPath())
	}
	switch {
	case len(names) == 0:
		return "", errors.New("the job staged no files: launch the pipeline with --worker_binary=<its own binary>")
	case len(names) == 1:
		return names[0], nil
	}
	for _, n := range names {
		if n == "worker" {
			return n, nil
		}
	}
	return "", fmt.Errorf("none of the %d staged files is the Go worker binary: %q", len(names), names)
}

// inherited is the pool's environment without the variables it sets per worker.
func inherited() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != envOptionsFile && name != envStatusEndpoint && name != envRunnerCapabilities {
			out = append(out, kv)
		}
	}
	return out
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// exitText describes how a worker process ended.
func exitText(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.ProcessState.String()
	default:
		return err.Error()
	}
}
