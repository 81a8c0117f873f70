package cloudtaskstest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const betaPrefix = "v2beta3."

// faults holds the fault-injection script and the call statistics. Every
// unary call passes through intercept.
type faults struct {
	mu      sync.Mutex
	scripts map[string][]codes.Code
	lose    int
	latency time.Duration
	st      Stats
}

func newFaults() *faults {
	return &faults{scripts: map[string][]codes.Code{}}
}

// knownMethods is the set of names InjectErrors accepts.
var knownMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range cloudtaskspb.CloudTasks_ServiceDesc.Methods {
		m[d.MethodName] = true
	}
	for _, d := range betapb.CloudTasks_ServiceDesc.Methods {
		m[betaPrefix+d.MethodName] = true
	}
	return m
}()

// methodKey turns a gRPC full method name into the InjectErrors name:
// "/google.cloud.tasks.v2.CloudTasks/CreateTask" -> "CreateTask",
// "/google.cloud.tasks.v2beta3.CloudTasks/GetQueue" -> "v2beta3.GetQueue".
func methodKey(full string) string {
	i := strings.LastIndex(full, "/")
	svc, name := full[:max(i, 0)], full[i+1:]
	if strings.Contains(svc, ".v2beta3.") {
		return betaPrefix + name
	}
	return name
}

func (f *faults) inject(method string, cs []codes.Code) {
	if !knownMethods[method] {
		panic(fmt.Sprintf("cloudtaskstest.InjectErrors: unknown method %q (use a v2 method name such as \"CreateTask\", or \"v2beta3.GetQueue\")", method))
	}
	f.mu.Lock()
	f.scripts[method] = append(f.scripts[method], cs...)
	f.mu.Unlock()
}

func (f *faults) loseResponses(n int) {
	f.mu.Lock()
	f.lose = max(0, f.lose+n)
	f.mu.Unlock()
}

func (f *faults) setLatency(d time.Duration) {
	f.mu.Lock()
	f.latency = max(0, d)
	f.mu.Unlock()
}

func (f *faults) stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (f *faults) resetStats() {
	f.mu.Lock()
	f.st = Stats{
		CreateTaskInFlight: f.st.CreateTaskInFlight, MaxCreateTaskInFlight: f.st.CreateTaskInFlight,
		DispatchesInFlight: f.st.DispatchesInFlight, MaxDispatchesInFlight: f.st.DispatchesInFlight,
	}
	f.mu.Unlock()
}

func (f *faults) dispatchStarted() {
	f.mu.Lock()
	f.st.DispatchAttempts++
	f.st.DispatchesInFlight++
	f.st.MaxDispatchesInFlight = max(f.st.MaxDispatchesInFlight, f.st.DispatchesInFlight)
	f.mu.Unlock()
}

// dispatchEnded records an attempt's outcome: "done", "exhausted", "retry"
// or "gone".
func (f *faults) dispatchEnded(outcome string) {
	f.mu.Lock()
	f.st.DispatchesInFlight--
	switch outcome {
	case "done":
		f.st.TasksSucceeded++
	case "exhausted":
		f.st.TasksExhausted++
	}
	f.mu.Unlock()
}

// next pops the scripted code for a call of method, or OK.
func (f *faults) next(method string) codes.Code {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.scripts[method]
	if len(s) == 0 {
		return codes.OK
	}
	c := s[0]
	if len(s) == 1 {
		delete(f.scripts, method)
	} else {
		f.scripts[method] = s[1:]
	}
	if c != codes.OK {
		f.st.InjectedErrors++
	}
	return c
}

func (f *faults) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := methodKey(info.FullMethod)
	create := method == "CreateTask"
	if create {
		f.mu.Lock()
		f.st.CreateTaskCalls++
		f.st.CreateTaskInFlight++
		f.st.MaxCreateTaskInFlight = max(f.st.MaxCreateTaskInFlight, f.st.CreateTaskInFlight)
		lat := f.latency
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.st.CreateTaskInFlight--
			f.mu.Unlock()
		}()
		if lat > 0 {
			t := time.NewTimer(lat)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, status.FromContextError(ctx.Err()).Err()
			}
		}
	}
	if c := f.next(method); c != codes.OK {
		return nil, status.Errorf(c, "cloudtaskstest: injected %s for %s", c, method)
	}
	resp, err := handler(ctx, req)
	if !create {
		return resp, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		f.st.TasksCreated++
		if f.lose > 0 {
			f.lose--
			f.st.LostResponses++
			return nil, status.Error(codes.Unavailable, "cloudtaskstest: response lost (the task was stored)")
		}
	case status.Code(err) == codes.AlreadyExists:
		f.st.AlreadyExists++
	}
	return resp, err
}
