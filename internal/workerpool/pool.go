// Package workerpool is a Beam worker pool for Go SDK workers: the BeamFnExternalWorkerPool
// service that a runner given an EXTERNAL environment asks to start workers. For each start it
// does what Beam's Go container does at boot, on this machine and without Docker: it reads the
// worker's provisioning information from the runner, retrieves the staged Go worker binary
// into a folder of its own (or runs a binary it was given), and starts that binary in worker
// mode as a new process.
//
// It differs from Beam's own pool (package container/pool, the Go boot program's
// --worker_pool) where that one does not fit the project's uses:
//
//   - It serves on the listener it is given, not on port 50000 of every interface.
//   - It accepts a worker id it has seen before. Python's FnApiRunner numbers its workers per
//     job ("worker_0", ...) and never stops them, so a second job asks for the same id again;
//     Beam's pool refuses it ("worker with ID already exists") and the job never starts.
//   - It stops a worker whose harness has finished. Beam's Go harness, once the runner closes
//     its control stream, prints that it exited and then sleeps until it is killed; a runner
//     that never calls StopWorker (Python's) would leave one idle process per job.
//   - Each worker's folder is removed when the worker exits.
package workerpool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// HarnessFinished is the line Beam's Go harness writes to its standard error when the runner
// has closed its control stream; the harness then sleeps until it is killed
// (core/runtime/harness/init in the Beam module).
const HarnessFinished = "Worker exited successfully!"

// The environment variables through which a Go SDK worker gets what its boot program would
// give it: the pipeline options (a file), and the runner's status endpoint and capabilities.
const (
	envOptionsFile        = "PIPELINE_OPTIONS_FILE"
	envStatusEndpoint     = "STATUS_ENDPOINT"
	envRunnerCapabilities = "RUNNER_CAPABILITIES"
)

// Options configure a Pool.
type Options struct {
	// Dir is the folder under which each worker gets a folder of its own (its staged files,
	// its pipeline options, its working directory), removed when the worker exits. Required.
	Dir string
	// Binary, when set, is the program every worker runs, and the staged files are not
	// retrieved: for a pool that serves the workers of its own program. Empty: the Go worker
	// binary the job staged.
	Binary string
	// Output receives the workers' standard output and error; nil is os.Stderr.
	Output io.Writer
	// Logf logs the pool's own lines (starts, exits, stops, refused requests); nil is
	// log.Printf.
	Logf func(format string, args ...any)
}

// Pool is the BeamFnExternalWorkerPool service: each StartWorker provisions a Go SDK worker
// and starts it as a process; StopWorker and Stop end them. Make it with New.
type Pool struct {
	fnpb.UnimplementedBeamFnExternalWorkerPoolServer

	opts Options
	srv  *grpc.Server

	mu       sync.Mutex
	workers  []*worker // from the start request until the process has exited
	stopping bool
}

// worker is one worker process the pool started.
type worker struct {
	id   string
	cmd  *exec.Cmd     // nil while the worker is being provisioned
	done chan struct{} // closed when the process has exited and its folder is removed
}

// New returns a pool with its gRPC server; Serve answers runners.
func New(opts Options) *Pool {
	if opts.Output == nil {
		opts.Output = os.Stderr
	}
	if opts.Logf == nil {
		opts.Logf = log.Printf
	}
	p := &Pool{opts: opts, srv: grpc.NewServer()}
	fnpb.RegisterBeamFnExternalWorkerPoolServer(p.srv, p)
	return p
}

// Serve answers runners on lis until Stop.
func (p *Pool) Serve(lis net.Listener) error { return p.srv.Serve(lis) }

// Stop refuses new workers, stops every running worker (SIGTERM, then SIGKILL after
// stopGrace), waits until they have exited and closes the service.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.stopping = true
	running := slices.Clone(p.workers)
	p.mu.Unlock()
	for _, w := range running {
		if w.cmd != nil {
			w.stop(p.opts.Logf)
		}
	}
	for _, w := range running {
		if w.cmd != nil {
			<-w.done
		}
	}
	p.srv.Stop()
}

// Running returns the ids of the workers whose processes run now, one entry per process.
func (p *Pool) Running() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, w := range p.workers {
		if w.cmd != nil {
			ids = append(ids, w.id)
		}
	}
	return ids
}

// StartWorker provisions the worker the runner asks for and starts it. A failure is answered
// in the response's Error, as the worker pool protocol wants, and logged. An id the pool has
// started before is started again as another process.
func (p *Pool) StartWorker(_ context.Context, req *fnpb.StartWorkerRequest) (*fnpb.StartWorkerResponse, error) {
	id := req.GetWorkerId()
	fail := func(format string, args ...any) (*fnpb.StartWorkerResponse, error) {
		msg := fmt.Sprintf("worker %q: ", id) + fmt.Sprintf(format, args...)
		p.opts.Logf("%s", msg)
		return &fnpb.StartWorkerResponse{Error: msg}, nil
	}
	if id == "" {
		return fail("the request has no worker id")
	}
	for _, e := range []struct {
		name string
		ep   *pipepb.ApiServiceDescriptor
	}{{"control", req.GetControlEndpoint()}, {"logging", req.GetLoggingEndpoint()}, {"provision", req.GetProvisionEndpoint()}} {
		if e.ep.GetUrl() == "" {
			return fail("the request has no %s endpoint", e.name)
		}
		if e.ep.GetAuthentication() != nil {
			return fail("the %s endpoint asks for authentication, which this pool does not support", e.name)
		}
	}

	w := &worker{id: id, done: make(chan struct{})}
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return fail("the pool is stopping")
	}
	again := slices.ContainsFunc(p.workers, func(o *worker) bool { return o.id == id })
	p.workers = append(p.workers, w)
	p.mu.Unlock()
	if again {
		p.opts.Logf("worker %q: the id was started before; starting another process under it", id)
	}

	cmd, wdir, err := p.provision(req)
	if err == nil {
		err = p.startProcess(w, cmd, wdir)
	}
	if err != nil {
		p.forget(w)
		return fail("%v", err)
	}
	return &fnpb.StartWorkerResponse{}, nil
}

// startProcess starts the worker's command, copies its output to the pool's, stops it when
// its harness has finished, and removes its folder when it exits.
func (p *Pool) startProcess(w *worker, cmd *exec.Cmd, wdir string) error {
	stderr, err := cmd.StderrPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		_ = os.RemoveAll(wdir)
		return fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p.mu.Lock()
	w.cmd = cmd
	stopping := p.stopping
	p.mu.Unlock()
	p.opts.Logf("worker %q started: pid %d (the pool is pid %d), binary %s", w.id, cmd.Process.Pid, os.Getpid(), cmd.Path)
	go func() {
		if copyWatching(p.opts.Output, stderr, []byte(HarnessFinished)) {
			p.opts.Logf("worker %q (pid %d): its harness has finished; stopping it", w.id, cmd.Process.Pid)
			w.stop(p.opts.Logf)
			_, _ = io.Copy(p.opts.Output, stderr)
		}
		err := cmd.Wait()
		p.opts.Logf("worker %q (pid %d) exited: %s", w.id, cmd.Process.Pid, exitText(err))
		if rmErr := os.RemoveAll(wdir); rmErr != nil {
			p.opts.Logf("worker %q: removing %s: %v", w.id, wdir, rmErr)
		}
		p.forget(w)
		close(w.done)
	}()
	if stopping { // Stop ran while this worker was provisioned and did not see it.
		w.stop(p.opts.Logf)
	}
	return nil
}

// forget removes w from the pool's workers.
func (p *Pool) forget(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.workers = slices.DeleteFunc(p.workers, func(o *worker) bool { return o == w })
}

// copyWatching copies r to out line by line until r ends or a line holds mark, and says
// whether it saw mark (the line is copied too).
func copyWatching(out io.Writer, r io.Reader, mark []byte) bool {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			_, _ = out.Write(line)
		}
		switch {
		case bytes.Contains(line, mark):
			return true
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return false
		}
	}
}

// StopWorker stops every process started under the worker id (SIGTERM, then SIGKILL after
// stopGrace). A worker that has exited already is answered with success.
func (p *Pool) StopWorker(_ context.Context, req *fnpb.StopWorkerRequest) (*fnpb.StopWorkerResponse, error) {
	id := req.GetWorkerId()
	p.mu.Lock()
	var running []*worker
	provisioning := false
	for _, w := range p.workers {
		switch {
		case w.id != id:
		case w.cmd == nil:
			provisioning = true
		default:
			running = append(running, w)
		}
	}
	p.mu.Unlock()
	switch {
	case len(running) == 0 && provisioning:
		return &fnpb.StopWorkerResponse{Error: fmt.Sprintf("worker %q is still being provisioned", id)}, nil
	case len(running) == 0:
		return &fnpb.StopWorkerResponse{Error: fmt.Sprintf("no worker %q runs in this pool", id)}, nil
	}
	for _, w := range running {
		p.opts.Logf("stopping worker %q (pid %d) at the runner's request", id, w.cmd.Process.Pid)
		w.stop(p.opts.Logf)
	}
	return &fnpb.StopWorkerResponse{}, nil
}

// stop sends the worker SIGTERM and, if it has not exited after stopGrace, SIGKILL. It does
// not wait.
func (w *worker) stop(logf func(string, ...any)) {
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
			logf("worker %q (pid %d) did not exit %v after SIGTERM; killing it", w.id, w.cmd.Process.Pid, stopGrace)
			_ = w.cmd.Process.Kill()
		}
	}()
}

// provision does what Beam's Go boot program does before it runs the worker binary: it reads
// the provisioning information, retrieves the staged files into a new folder (unless the pool
// runs its own Binary) and writes the pipeline options there. It returns the worker's command,
// not yet started, and its folder.
func (p *Pool) provision(req *fnpb.StartWorkerRequest) (*exec.Cmd, string, error) {
	id := req.GetWorkerId()
	wdir, err := os.MkdirTemp(p.opts.Dir, "worker-")
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
		bin := p.opts.Binary
		if bin == "" {
			if bin, err = retrieveBinary(ctx, req, info, filepath.Join(wdir, "staged")); err != nil {
				return nil, err
			}
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
		cmd := exec.Command(bin,
			"--worker=true",
			"--id="+id,
			"--logging_endpoint="+logging,
			"--control_endpoint="+control,
			"--semi_persist_dir="+wdir,
		)
		cmd.Dir = wdir
		cmd.Env = append(inherited(), env...)
		cmd.Stdout = p.opts.Output
		return cmd, nil
	}()
	if err != nil {
		_ = os.RemoveAll(wdir)
		return nil, "", err
	}
	return cmd, wdir, nil
}

// retrieveBinary retrieves the job's staged files into dir and returns the path of the Go
// worker binary among them.
func retrieveBinary(ctx context.Context, req *fnpb.StartWorkerRequest, info *fnpb.ProvisionInfo, dir string) (string, error) {
	artifacts := firstSet(info.GetArtifactEndpoint().GetUrl(), req.GetArtifactEndpoint().GetUrl())
	if artifacts == "" {
		return "", errors.New("neither the request nor the provisioning information names an artifact endpoint")
	}
	files, err := artifact.Materialize(ctx, artifacts, info.GetDependencies(), info.GetRetrievalToken(), dir)
	if err != nil {
		return "", fmt.Errorf("retrieving the staged files: %w", err)
	}
	name, err := WorkerBinary(files)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// WorkerBinary picks the Go worker binary among the retrieved files, as Beam's boot program
// does: the file whose role says so, else the only file, else the one named "worker". It
// returns the file's name under the staging folder.
func WorkerBinary(files []*pipepb.ArtifactInformation) (string, error) {
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
